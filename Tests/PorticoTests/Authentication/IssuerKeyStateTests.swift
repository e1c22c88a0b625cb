import Testing

@testable import Portico

/// The schedule of one issuer's key fetches, on a clock the test moves.
@Suite("When an issuer's keys are fetched")
struct IssuerKeyStateTests {
    typealias State = IssuerKeyState<String>

    @Test("the first token waits for the first load; a failed one answers unavailable until the retry interval has passed")
    func firstLoad() {
        var state = State(cooldown: 60, retryInterval: 5)
        guard case .wait(startLoad: true) = state.lookup(kid: "a", now: 100, mayWait: true) else { Issue.record("no load"); return }
        // A second token while loading waits for the same load.
        guard case .wait(startLoad: false) = state.lookup(kid: "a", now: 100, mayWait: true) else { Issue.record("no wait"); return }
        state.loadFailed(now: 101)
        guard case .unavailable(let after) = state.lookup(kid: "a", now: 103, mayWait: true) else {
            Issue.record("not unavailable"); return
        }
        #expect(after == 3)
        guard case .wait(startLoad: true) = state.lookup(kid: "a", now: 106, mayWait: true) else { Issue.record("no retry"); return }
        state.loaded(["a": "key-a"], fingerprint: "a", lifetime: 300, now: 106)
        guard case .use("key-a", refresh: false) = state.lookup(kid: "a", now: 107, mayWait: true) else { Issue.record("no key"); return }
    }

    @Test("an unknown kid fetches at once, then not again within the cooldown; a token that already waited never waits twice")
    func unknownKids() {
        var state = State(cooldown: 60)
        _ = state.lookup(kid: "a", now: 0, mayWait: true)
        state.loaded(["a": "key-a"], fingerprint: "a", lifetime: 300, now: 0)
        guard case .wait(startLoad: true) = state.lookup(kid: "new", now: 1, mayWait: true) else { Issue.record("no refetch"); return }
        state.loaded(["a": "key-a", "new": "key-new"], fingerprint: "a new", lifetime: 300, now: 2)
        guard case .use("key-new", _) = state.lookup(kid: "new", now: 2, mayWait: false) else { Issue.record("rotated key unused"); return }
        for now in Int64(3)..<61 {
            guard case .unknownKey = state.lookup(kid: "forged-\(now)", now: now, mayWait: true) else {
                Issue.record("fetched again at \(now)")
                return
            }
        }
        guard case .wait(startLoad: true) = state.lookup(kid: "forged", now: 61, mayWait: true) else {
            Issue.record("cooldown kept"); return
        }
        state.loadFailed(now: 62)
        guard case .unknownKey = state.lookup(kid: "forged", now: 200, mayWait: false) else { Issue.record("waited twice"); return }
    }

    @Test("the generation moves when a load brings another set, not when it brings the same one again")
    func generations() {
        var state = State(cooldown: 60)
        _ = state.lookup(kid: "a", now: 0, mayWait: true)
        state.loaded(["a": "key-a"], fingerprint: "a", lifetime: 10, now: 0)
        let first = state.generation
        state.loaded(["a": "key-a"], fingerprint: "a", lifetime: 10, now: 10)
        #expect(state.generation == first)
        state.loaded(["b": "key-b"], fingerprint: "b", lifetime: 10, now: 20)
        #expect(state.generation == first + 1)
        state.loadFailed(now: 30)
        #expect(state.generation == first + 1)
    }

    @Test("an expired set is refreshed in the background while its keys serve, and kept when the refresh fails")
    func refresh() {
        var state = State(cooldown: 60, retryInterval: 5)
        _ = state.lookup(kid: "a", now: 0, mayWait: true)
        state.loaded(["a": "key-a"], fingerprint: "a", lifetime: 100, now: 0)
        guard case .use(_, refresh: false) = state.lookup(kid: "a", now: 99, mayWait: true) else { Issue.record("early refresh"); return }
        guard case .use(_, refresh: true) = state.lookup(kid: "a", now: 100, mayWait: true) else { Issue.record("no refresh"); return }
        // One refresh at a time.
        guard case .use(_, refresh: false) = state.lookup(kid: "a", now: 101, mayWait: true) else { Issue.record("two refreshes"); return }
        state.loadFailed(now: 102)
        guard case .use("key-a", refresh: false) = state.lookup(kid: "a", now: 103, mayWait: true) else {
            Issue.record("keys lost"); return
        }
        guard case .use("key-a", refresh: true) = state.lookup(kid: "a", now: 107, mayWait: true) else { Issue.record("no retry"); return }
    }
}
