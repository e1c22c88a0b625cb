import NIOCore
import PorticoPolicy

/// The address lists: a service's `allowFrom` and `denyFrom`, checked before authentication (a
/// client the service refuses learns nothing about its keys and costs no MAC), and a key's,
/// checked once the key is known (a stolen key is no use from elsewhere). The client's address is
/// the one ``ClientAddressRule`` gives (`trustedProxies`). A refusal is 403
/// `urn:portico:problem:address-refused`.
struct AddressListStage: RequestStage {
    enum Scope {
        /// The routed service's lists; before authentication.
        case service
        /// The authenticated key's lists; after authentication.
        case key
    }

    let scope: Scope

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        guard let routed = exchange.routed else { return .proceed }
        let list: AddressList
        switch scope {
        case .service:
            guard let serviceList = routed.rules.addresses else { return .proceed }
            list = serviceList
        case .key:
            guard let keyID = exchange.keyID, let keyList = exchange.policy.keyAddresses[keyID] else { return .proceed }
            list = keyList
        }
        guard !list.isEmpty else { return .proceed }
        // An address the gateway could not read (not an IP connection) is admitted only where no
        // allow list asks for one.
        let admitted = exchange.client.addressBytes.map(list.admits) ?? (list.allow == nil)
        return admitted ? .proceed : .answer(.addressRefused(service: routed.rules.name, byKey: scope == .key))
    }
}
