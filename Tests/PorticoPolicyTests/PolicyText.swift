@testable import PorticoPolicy

/// Loads a policy written in a test, as one file `p.yaml`: what the policy suites share.
protocol LoadsPolicyText {}

extension LoadsPolicyText {
    static func load(_ yaml: String) -> Result<PolicySnapshot, PolicyError> {
        Result { () throws(PolicyError) in try PolicyLoader().load(sources: [(file: "p.yaml", text: yaml)]) }
    }

    /// Every error the policy has, as printed; empty when it loads.
    static func diagnostics(_ yaml: String) -> [String] {
        switch load(yaml) {
        case .success: []
        case .failure(let error): error.diagnostics.map(\.description)
        }
    }
}
