import Foundation

/// The repository the tests run from: its shipped policies, scripts and fixtures.
public enum Repository {
    /// The repository's root directory, found from this file's place in it.
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
}
