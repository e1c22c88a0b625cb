// swift-tools-version:6.0
// What watching a flush costs, two ways, on a real connected socket channel on its event loop:
// asking the channel what it holds unwritten (`bufferedWritableBytes`, NIO's option lookup with
// its type checks), against a promise with a completion callback (what the timeout handler made
// for every flush before the eleventh step of issue 35). A package of its own, like
// bench/allocations. Run: `swift run -c release --package-path bench/flush-watch-cost`.
import PackageDescription

let package = Package(
    name: "PorticoFlushWatchCost",
    platforms: [.macOS(.v14)],
    dependencies: [.package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2")],
    targets: [
        .executableTarget(
            name: "FlushWatchCost",
            dependencies: [.product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")],
            path: "Sources/FlushWatchCost"
        )
    ]
)
