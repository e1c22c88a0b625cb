import FuzzSupport

runLibFuzzer(fuzzGatewayHead)
