import FuzzSupport

runLibFuzzer(fuzzPathNormalizer)
