import PorticoPolicy
import Testing

@testable import Portico

/// The balancers' tables on their own: the smooth round-robin order and the consistent-hash table.
@Suite("Target balancing tables")
struct TargetBalancerTests {
    @Test("smooth weighted round robin interleaves: weights 5, 1, 1 give a a b a c a a")
    func smoothOrder() {
        #expect(TargetBalancer.smoothOrder([5, 1, 1]) == [0, 0, 1, 0, 2, 0, 0])
        #expect(TargetBalancer.smoothOrder([1, 1, 1]) == [0, 1, 2])
        let order = TargetBalancer.smoothOrder([3, 2])
        #expect(order.filter { $0 == 0 }.count == 3 && order.count == 5)
    }

    @Test("the hash table gives each target a share in proportion to its weight")
    func maglevShares() {
        let names = (1...4).map { "http://10.0.0.\($0):8080" }
        let table = TargetBalancer.maglevTable(names: names, weights: [1, 1, 1, 1])
        let shares = (0..<4).map { index in Double(table.filter { $0 == index }.count) / Double(table.count) }
        #expect(shares.allSatisfy { abs($0 - 0.25) < 0.01 }, "\(shares)")
        let weighted = TargetBalancer.maglevTable(names: Array(names.prefix(2)), weights: [3, 1])
        let heavy = Double(weighted.filter { $0 == 0 }.count) / Double(weighted.count)
        #expect(abs(heavy - 0.75) < 0.01, "\(heavy)")
    }

    @Test("removing a target moves the keys it held and few others")
    func maglevDisruption() {
        let names = (1...5).map { "http://10.0.0.\($0):8080" }
        let before = TargetBalancer.maglevTable(names: names, weights: [1, 1, 1, 1, 1])
        let after = TargetBalancer.maglevTable(names: Array(names.prefix(4)), weights: [1, 1, 1, 1])
        #expect(before.count == after.count)
        var moved = 0
        var kept = 0
        for slot in before.indices where before[slot] != 4 {
            kept += 1
            if before[slot] != after[slot] { moved += 1 }
        }
        // Maglev's guarantee is approximate: a few slots of the remaining targets change hands too.
        #expect(Double(moved) / Double(kept) < 0.05, "\(moved) of \(kept) slots of the remaining targets moved")
    }

    @Test("the system resolver finds localhost's loopback address in /etc/hosts, and nothing for a name that cannot exist")
    func systemResolver() {
        let resolver = SystemAddressResolver()
        #expect(resolver.addresses(of: "localhost")?.contains("127.0.0.1") == true)
        #expect(resolver.addresses(of: "127.0.0.1") == ["127.0.0.1"])
    }
}
