import FuzzSupport

runLibFuzzer(fuzzSignatureFields)
