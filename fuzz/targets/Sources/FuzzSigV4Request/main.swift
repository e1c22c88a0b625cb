import FuzzSupport

runLibFuzzer(fuzzSigV4Request)
