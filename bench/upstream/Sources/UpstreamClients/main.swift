// Sends `--requests` GET requests to `--url` through each client in turn, `--concurrency` chains at
// a time on one event loop (each chain starts its next request from the previous one's result, on
// the loop, as the gateway does), after `--warmup` requests that are not counted. Prints
// requests/s and this process's CPU time (user + system, from getrusage) per request. The backend
// runs in another process, so its CPU is not counted here.
import Foundation
import NIOCore
import NIOPosix
import PorticoUpstream

struct Options {
    var url = "http://127.0.0.1:18195/v1/quotes/AAPL"
    var requests = 10_000
    var concurrency = 1
    var warmup = 500
    var clients = ["nio", "curl"]

    init(_ arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let flag = iterator.next() {
            guard let value = iterator.next() else { fatalError("\(flag) needs a value") }
            switch flag {
            case "--url": url = value
            case "--requests": requests = Int(value)!
            case "--concurrency": concurrency = Int(value)!
            case "--warmup": warmup = Int(value)!
            case "--clients": clients = value.split(separator: ",").map(String.init)
            default: fatalError("unknown option \(flag)")
            }
        }
    }
}

/// One chain of sequential requests; its own response handler, on the loop.
final class Chain: UpstreamResponseHandler {
    let client: any UpstreamClient
    let loop: any EventLoop
    let request: UpstreamRequest
    let done: EventLoopPromise<Int>
    var remaining: Int
    var failures = 0
    var task: (any UpstreamTask)?

    init(client: any UpstreamClient, loop: any EventLoop, request: UpstreamRequest, count: Int) {
        self.client = client
        self.loop = loop
        self.request = request
        self.remaining = count
        self.done = loop.makePromise()
    }

    func next() {
        guard remaining > 0 else {
            done.succeed(failures)
            return
        }
        remaining -= 1
        task = client.execute(request, eventLoop: loop, handler: self)
    }

    func upstreamReceived(_ events: UpstreamEvents) {
        if let body = events.body, events.result == nil { task?.consumed(bytes: body.readableBytes) }
        guard let result = events.result else { return }
        if case .failure = result { failures += 1 }
        next()
    }
}

func cpuSeconds() -> Double {
    var usage = rusage()
    #if os(Linux)
    getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Runs `count` requests in `concurrency` chains on `loop`; returns the failures.
func run(_ client: any UpstreamClient, on loop: any EventLoop, request: UpstreamRequest, count: Int, concurrency: Int) throws -> Int {
    let futures = try loop.submit { () -> [EventLoopFuture<Int>] in
        (0..<concurrency).map { index in
            let share = count / concurrency + (index < count % concurrency ? 1 : 0)
            let chain = Chain(client: client, loop: loop, request: request, count: share)
            chain.next()
            return chain.done.futureResult
        }
    }.wait()
    return try EventLoopFuture.whenAllSucceed(futures, on: loop).wait().reduce(0, +)
}

let options = Options(CommandLine.arguments)
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let loop = group.next()
let request = UpstreamRequest(method: "GET", url: options.url, headers: [("Host", "bench"), ("X-Request-Id", "bench")])

for name in options.clients {
    let client: any UpstreamClient =
        switch name {
        case "nio": NIOUpstreamClient(group: group, configuration: .init(maxConnectionsPerHost: 64))
        case "curl": CurlUpstreamClient(configuration: .init(threads: 1, maxConnectionsPerHost: 64))
        default: fatalError("unknown client \(name)")
        }
    _ = try run(client, on: loop, request: request, count: options.warmup, concurrency: options.concurrency)
    let cpuBefore = cpuSeconds()
    let started = ContinuousClock.now
    let failures = try run(client, on: loop, request: request, count: options.requests, concurrency: options.concurrency)
    let elapsed = ContinuousClock.now - started
    let cpu = cpuSeconds() - cpuBefore
    client.shutdown()
    let wall = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let line = [
        name.padding(toLength: 5, withPad: " ", startingAt: 0),
        "concurrency \(options.concurrency)", "\(options.requests) requests",
        String(format: "%.0f req/s", Double(options.requests) / wall), String(format: "CPU %.3f s", cpu),
        String(format: "%.1f µs CPU/request", cpu / Double(options.requests) * 1e6), "failures \(failures)",
    ].joined(separator: "  ")
    print(line)
}
try group.syncShutdownGracefully()
