import FuzzSupport

runLibFuzzer(fuzzEventStream)
