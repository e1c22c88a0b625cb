import FuzzSupport

runLibFuzzer(fuzzHTTP2Connection)
