import FuzzSupport

runLibFuzzer(fuzzBearerToken)
