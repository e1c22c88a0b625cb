import NIOHTTP1

extension Problem {
    /// Every source of a facade failed. Names the source tried last and, when it answered but could
    /// not fill the contract, the field: the operator's first clue. Never a half-filled object.
    static func facadeSourceFailed(source: String, field: String?, reason: String) -> Problem {
        var extensions = [("source", source)]
        if let field { extensions.append(("field", field)) }
        let detail =
            field.map { "The source \(source) could not produce the required field \"\($0)\"." }
            ?? "The source \(source) gave no usable answer (\(reason))."
        return Problem(
            type: typePrefix + "facade-source-failed", title: "No source could serve the contract", status: .badGateway,
            detail: detail, extensions: extensions)
    }

    /// The facade's source has no such resource (it answered 404): the client's own mistake.
    static func facadeNotFound(source: String) -> Problem {
        Problem(
            type: typePrefix + "not-found", title: "Not found", status: .notFound,
            detail: "The source \(source) has no such resource.", extensions: [("source", source)])
    }

    /// The path after the service's prefix does not fit the facade's `parameters` template.
    static func facadeNoSuchPath(_ path: String) -> Problem {
        Problem(
            type: typePrefix + "not-found", title: "Not found", status: .notFound,
            detail: "This service has no resource at \(path).")
    }

    /// A parameter a source's request needs is neither in the path nor in the query.
    static func facadeParameterMissing(_ name: String) -> Problem {
        Problem(
            type: typePrefix + "parameter-missing", title: "Parameter missing", status: .badRequest,
            detail: "This request needs the parameter \"\(name)\", in the path or as a query parameter.",
            extensions: [("parameter", name)])
    }

    /// A parameter's value would be a path segment of a source's request, and cannot be one:
    /// empty, `.` or `..` (which the backend would resolve to another route).
    static func facadeParameterUnusable(_ name: String) -> Problem {
        Problem(
            type: typePrefix + "parameter-invalid", title: "Parameter invalid", status: .badRequest,
            detail: "The parameter \"\(name)\" cannot be empty, \".\" or \"..\".", extensions: [("parameter", name)])
    }

    /// A `code` version names a handler that was not registered when the gateway started.
    static func codeHandlerMissing(_ name: String) -> Problem {
        Problem(
            type: typePrefix + "handler-missing", title: "Handler not registered", status: .notImplemented,
            detail: "The handler \(name) is not registered with this gateway.")
    }
}
