import PorticoReform

/// The `facade` and `code` handlers of a version: contracts, sources, their reformers, and the
/// checks that make a facade's answer always satisfy its contract (every source fills every
/// required field, locators fit their source's format, the named sources exist).
extension PolicyDocumentReader {
    typealias Backends = [String: (policy: BackendPolicy, value: PolicyValue)]

    func readFacade(_ value: PolicyValue, backends: Backends) -> FacadePolicy? {
        let known = ["parameters", "contract", "sources", "active", "fallback", "shadow", "aggregate", "maxBodyBytes"]
        guard let fields = value.fields(known: known) else { return nil }
        let parameters = fields.optional("parameters") { value -> String? in
            guard let text = value.nonEmptyString() else { return nil }
            guard text.hasPrefix("/"), !text.contains("?"), FacadeSourcePolicy.placeholders(in: text).allSatisfy({ !$0.isEmpty }) else {
                value.error("expected the path after the service's prefix with named segments, such as /{symbol}, found \"\(text)\"")
                return nil
            }
            return text
        }
        let contract = fields.required("contract", readContract)
        let maxBodyBytes = fields.optional("maxBodyBytes") { $0.byteCount() }
        var sources: [FacadeSourcePolicy] = []
        if let entries = fields.required("sources", { $0.mappingEntries() }) {
            if entries.isEmpty { fields["sources"]?.error("expected at least one source") }
            for (name, sourceValue) in entries {
                if let source = readSource(sourceValue, name: name, contract: contract, backends: backends) { sources.append(source) }
            }
        }
        let names = Set(sources.map(\.name))
        let allNames = fields["sources"]?.mappingKeys() ?? []
        func sourceName(_ value: PolicyValue) -> String? {
            guard let name = value.nonEmptyString() else { return nil }
            guard allNames.contains(name) else {
                value.error("unknown source \"\(name)\"; expected one of: \(allNames.joined(separator: ", "))")
                return nil
            }
            return name
        }
        func sourceList(_ value: PolicyValue) -> [String]? {
            guard let items = value.sequence() else { return nil }
            var list: [String] = []
            for item in items {
                guard let name = sourceName(item) else { continue }
                if list.contains(name) { item.error("source \"\(name)\" is listed twice") }
                list.append(name)
            }
            return list
        }
        let active = fields.optional("active", sourceName)
        let fallback = fields.optional("fallback", default: [], sourceList)
        let shadow = fields.optional("shadow", sourceName)
        let aggregate = fields.optional("aggregate", default: [], sourceList)
        switch (active, fields["aggregate"]) {
        case (nil, nil): if fields["active"] == nil { value.error("expected the active source (active) or the sources merged (aggregate)") }
        case (.some, .some(let aggregateValue)): aggregateValue.error("a facade has either an active source or an aggregate, not both")
        default: break
        }
        if let active, fallback.contains(active), let fallbackValue = fields["fallback"] {
            fallbackValue.error("the active source \"\(active)\" cannot also be its own fallback")
        }
        if let shadow, shadow == active, let shadowValue = fields["shadow"] {
            shadowValue.error("the shadow source must differ from the active source \"\(shadow)\"")
        }
        if !aggregate.isEmpty, let contract, let aggregateValue = fields["aggregate"] {
            // Together the parts must fill every required field; each alone need not.
            let filled = Set(sources.filter { aggregate.contains($0.name) }.flatMap { $0.fields.map(\.field) })
            for field in contract.fields where field.required && !filled.contains(field.name) {
                aggregateValue.error("no source in the aggregate fills the required field \"\(field.name)\"")
            }
        } else if let contract {
            for source in sources {
                let filled = Set(source.fields.map(\.field))
                for field in contract.fields where field.required && !filled.contains(field.name) {
                    let fieldsValue = fields["sources"]?.value(forKey: source.name)?.value(forKey: "fields") ?? value
                    fieldsValue.error("source \"\(source.name)\" does not fill the contract's required field \"\(field.name)\"")
                }
            }
        }
        guard let contract, names.count == allNames.count, !sources.isEmpty else { return nil }
        var facade = FacadePolicy(parameters: parameters, contract: contract, sources: sources, active: active)
        facade.fallback = fallback
        facade.shadow = shadow
        facade.aggregate = aggregate
        if let maxBodyBytes { facade.maxBodyBytes = maxBodyBytes }
        return facade
    }

    /// `name: type`, or `name: { type: …, required: false }`; a `?` after the type is shorthand
    /// for optional (`note: string?`).
    private func readContract(_ value: PolicyValue) -> Contract? {
        guard let entries = value.mappingEntries() else { return nil }
        if entries.isEmpty { value.error("expected at least one field") }
        var fields: [Contract.Field] = []
        for (name, fieldValue) in entries {
            func type(_ value: PolicyValue) -> (FieldType, Bool)? {
                guard var text = value.string() else { return nil }
                let optional = text.hasSuffix("?")
                if optional { text.removeLast() }
                guard let type = FieldType(rawValue: text) else {
                    value.error(
                        "expected a JSON type (\(FieldType.allCases.map(\.rawValue).joined(separator: ", "))), found \(value.describe())")
                    return nil
                }
                return (type, !optional)
            }
            if fieldValue.mappingKeys().isEmpty {
                if let (type, required) = type(fieldValue) { fields.append(.init(name: name, type: type, required: required)) }
            } else if let spec = fieldValue.fields(known: ["type", "required"]) {
                let required = spec.optional("required", default: true) { $0.bool() }
                if let (type, optional) = spec.required("type", type) {
                    fields.append(.init(name: name, type: type, required: required && optional))
                }
            }
        }
        guard fields.count == entries.count, !fields.isEmpty else { return nil }
        return Contract(fields: fields)
    }

    private func readSource(_ value: PolicyValue, name: String, contract: Contract?, backends: Backends) -> FacadeSourcePolicy? {
        guard let fields = value.fields(known: ["backend", "request", "format", "header", "fields"]) else { return nil }
        let backend = fields.required("backend") { value -> String? in
            guard let name = value.nonEmptyString() else { return nil }
            guard backends[name] != nil else {
                let known = backends.keys.sorted().joined(separator: ", ")
                value.error("unknown backend \"\(name)\"; expected one of: \(known.isEmpty ? "(no backends defined)" : known)")
                return nil
            }
            return name
        }
        let request = fields.required("request") { value -> String? in
            guard let text = value.nonEmptyString() else { return nil }
            // `//host/x` after the backend's URL would name another host.
            guard text.hasPrefix("/"), !text.hasPrefix("//"), !text.contains("#"), !text.contains(" "),
                FacadeSourcePolicy.placeholders(in: text).allSatisfy({ !$0.isEmpty && !$0.contains("{") })
            else {
                value.error(
                    "expected a path and query starting with one '/', with {name} placeholders, such as /quotes.csv?s={symbol}; found \"\(text)\""
                )
                return nil
            }
            return text
        }
        let format = fields.required("format") { $0.oneOf(SourceFormat.allCases) }
        let header = fields.optional("header", default: false) { $0.bool() }
        if fields["header"] != nil, let format, format != .csv { fields["header"]?.error("applies to csv sources only") }
        var mappings: [FieldMapping] = []
        var complete = true
        if let entries = fields.required("fields", { $0.mappingEntries() }) {
            for (field, mappingValue) in entries {
                if let contract, !contract.fields.contains(where: { $0.name == field }) {
                    let known = contract.fields.map(\.name).joined(separator: ", ")
                    mappingValue.error("\"\(field)\" is not a field of the contract (\(known))")
                    complete = false
                    continue
                }
                guard let format, let mapping = readMapping(mappingValue, field: field, format: format, header: header) else {
                    complete = false
                    continue
                }
                mappings.append(mapping)
            }
        } else {
            complete = false
        }
        guard let backend, let request, let format, complete else { return nil }
        var source = FacadeSourcePolicy(name: name, backend: backend, request: request, format: format, fields: mappings)
        source.header = header
        return source
    }

    /// One field's locator (`pointer`, `path` or `column`, by the source's format; or `value`, or
    /// `parameter`) and its conversions (`convert`). A bare string is the format's locator.
    private func readMapping(_ value: PolicyValue, field: String, format: SourceFormat, header: Bool) -> FieldMapping? {
        let formatKey: String =
            switch format {
            case .json: "pointer"
            case .xml: "path"
            case .csv: "column"
            }
        if value.mappingKeys().isEmpty {
            guard let text = value.nonEmptyString() else { return nil }
            guard let locator = locator(formatKey, text, value: value, header: header) else { return nil }
            return FieldMapping(field: field, locator: locator)
        }
        let locatorKeys = ["pointer", "path", "column", "value", "parameter"]
        guard let fields = value.fields(known: locatorKeys + ["convert"]) else { return nil }
        let given = locatorKeys.filter { fields[$0] != nil }
        guard given.count == 1, let key = given.first, let locatorValue = fields[key] else {
            value.error("expected one locator: \(formatKey), value or parameter")
            return nil
        }
        if ["pointer", "path", "column"].contains(key), key != formatKey {
            locatorValue.error("\(key) does not locate anything in a \(format.rawValue) body; expected \(formatKey)")
            return nil
        }
        let conversions = fields.optional("convert", default: []) { value -> [Conversion]? in
            guard let items = value.sequence() else { return nil }
            let converted = items.compactMap { $0.oneOf(Conversion.allCases) }
            return converted.count == items.count ? converted : nil
        }
        if let convert = fields["convert"], conversions.isEmpty, convert.sequence()?.isEmpty == false { return nil }
        let locator: Locator?
        if key == "value" {
            locator = fixedValue(locatorValue).map(Locator.fixed)
        } else {
            locator = locatorValue.string().flatMap { self.locator(key, $0, value: locatorValue, header: header) }
        }
        guard let locator else { return nil }
        return FieldMapping(field: field, locator: locator, conversions: conversions)
    }

    private func locator(_ key: String, _ text: String, value: PolicyValue, header: Bool) -> Locator? {
        switch key {
        case "pointer":
            guard text.isEmpty || text.hasPrefix("/") else {
                value.error("expected a JSON pointer such as /query/results/channel/item/condition/temp, found \"\(text)\"")
                return nil
            }
            return .jsonPointer(text)
        case "path":
            guard !text.isEmpty, !text.contains("//") else {
                value.error("expected an element path such as StockQuotes/Stock/Last, found \"\(text)\"")
                return nil
            }
            return .xmlPath(text)
        case "column":
            if let index = Int(text) {
                guard index >= 0 else {
                    value.error("expected a column index from 0, found \(index)")
                    return nil
                }
                return .csvIndex(index)
            }
            guard header else {
                value.error("column \"\(text)\" is named, but the source has no header line (header: true)")
                return nil
            }
            return .csvColumn(text)
        default:
            return .parameter(text)
        }
    }

    private func fixedValue(_ value: PolicyValue) -> ReformValue? {
        guard let text = value.string() else { return nil }
        let plain = value.describe() == text
        if plain, let bool = Bool(text) { return .boolean(bool) }
        if plain, let integer = Int64(text) { return .integer(integer) }
        if plain, let number = Double(text), number.isFinite { return .number(number) }
        return .string(text)
    }

    func readCodeHandler(_ value: PolicyValue, backends: Backends) -> CodeHandlerPolicy? {
        guard let fields = value.fields(known: ["name", "backends"]) else { return nil }
        let name = fields.required("name") { $0.nonEmptyString() }
        let used = fields.optional("backends", default: []) { value -> [String]? in
            guard let items = value.sequence() else { return nil }
            return items.compactMap { item -> String? in
                guard let name = item.nonEmptyString() else { return nil }
                guard backends[name] != nil else {
                    item.error("unknown backend \"\(name)\"; expected one of: \(backends.keys.sorted().joined(separator: ", "))")
                    return nil
                }
                return name
            }
        }
        guard let name else { return nil }
        return CodeHandlerPolicy(name: name, backends: used)
    }
}
