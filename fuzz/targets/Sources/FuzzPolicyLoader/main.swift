import FuzzSupport

runLibFuzzer(fuzzPolicyLoader)
