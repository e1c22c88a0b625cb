import FuzzSupport

runLibFuzzer(fuzzBackendResponse)
