import FuzzSupport

runLibFuzzer(fuzzClientRequest)
