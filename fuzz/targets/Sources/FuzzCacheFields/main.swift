import FuzzSupport

runLibFuzzer(fuzzCacheFields)
