import PorticoPolicy

/// How one backend spreads its requests over its targets, compiled with the policy: the smooth
/// weighted round-robin order, or the consistent-hash table; least-request needs neither.
///
/// Choosing is lock-free: a round-robin position and a random draw both come from one atomic
/// counter of the backend (``CompiledBackend``).
struct TargetBalancer: Sendable {
    enum Mode: Sendable {
        /// One target: nothing to choose.
        case single
        /// Target indices in nginx's smooth weighted round-robin order, one cycle long (the sum of
        /// the weights): `{a: 5, b: 1, c: 1}` gives `a a b a c a a`, not five `a`s in a row.
        case roundRobin([UInt8])
        /// Two targets drawn at random, the one with fewer requests in flight for its weight.
        case leastRequest
        /// A Maglev table (Eisenbud et al., NSDI 2016) of a prime number of slots, filled by the
        /// targets in turn, each as often as its weight says, from its own pseudo-random permutation
        /// of the slots: a key hashes to a slot, and adding or removing a target moves only the keys
        /// of the slots it takes or gives up.
        case hash([UInt8], on: HashKey)
    }

    let mode: Mode

    /// - Parameters: the backend's targets, compiled (one per resolved address), by `weights` and
    ///   `names` (their origins, which place them in the hash table).
    init(_ balance: BalancePolicy, hashOn: HashKey, weights: [Int], names: [String]) {
        guard weights.count > 1 else {
            mode = .single
            return
        }
        switch balance {
        case .roundRobin: mode = .roundRobin(Self.smoothOrder(weights))
        case .leastRequest: mode = .leastRequest
        case .hash: mode = .hash(Self.maglevTable(names: names, weights: weights), on: hashOn)
        }
    }

    /// One cycle of smooth weighted round robin: each turn every target gains its weight, the one
    /// with the most goes and gives back the total.
    static func smoothOrder(_ weights: [Int]) -> [UInt8] {
        let total = weights.reduce(0, +)
        var current = [Int](repeating: 0, count: weights.count)
        var order: [UInt8] = []
        order.reserveCapacity(total)
        for _ in 0..<total {
            var best = 0
            for index in weights.indices {
                current[index] += weights[index]
                if current[index] > current[best] { best = index }
            }
            current[best] -= total
            order.append(UInt8(best))
        }
        return order
    }

    /// Table sizes: primes, the smallest that gives every weight unit twenty slots or more is used.
    static let tableSizes = [1031, 4099, 16411, 65537]

    static func maglevTable(names: [String], weights: [Int]) -> [UInt8] {
        let divisor = weights.reduce(0) { gcd($0, $1) }
        let units = weights.reduce(0) { $0 + $1 / divisor }
        let size = tableSizes.first { $0 >= 20 * units } ?? tableSizes.last!
        let permutations = names.map { name -> (offset: Int, skip: Int) in
            let offset = Int(fnv1a(name.utf8, seed: 0xcbf2_9ce4_8422_2325) % UInt64(size))
            let skip = Int(fnv1a(name.utf8, seed: 0x8422_2325_cbf2_9ce4) % UInt64(size - 1)) + 1
            return (offset, skip)
        }
        let heaviest = weights.max()!
        var table = [Int](repeating: -1, count: size)
        var next = [Int](repeating: 0, count: names.count)
        var credit = [Int](repeating: 0, count: names.count)
        var filled = 0
        while filled < size {
            for index in names.indices {
                // Each round a target earns its weight; it takes a slot per `heaviest` earned, so
                // the heaviest takes one every round and the others in proportion.
                credit[index] += weights[index]
                while credit[index] >= heaviest && filled < size {
                    credit[index] -= heaviest
                    var slot = (permutations[index].offset + next[index] * permutations[index].skip) % size
                    while table[slot] >= 0 {
                        next[index] += 1
                        slot = (permutations[index].offset + next[index] * permutations[index].skip) % size
                    }
                    table[slot] = index
                    next[index] += 1
                    filled += 1
                }
            }
        }
        return table.map { UInt8($0) }
    }

    /// FNV-1a, 64-bit: the same in every gateway of a fleet, so that they all send a key to the
    /// same target.
    static func fnv1a(_ bytes: some Sequence<UInt8>, seed: UInt64 = 0xcbf2_9ce4_8422_2325) -> UInt64 {
        var hash = seed
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    private static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
}
