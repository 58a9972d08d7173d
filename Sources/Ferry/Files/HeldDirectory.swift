import CFerrySystem
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An open directory, closed when its last holder lets it go.
///
/// A ``PartialFile`` keeps the directory it was created in (its name is looked up, and the
/// file moved, relative to it), and a decoded body made beside it shares the same one.
/// The default partials directory is held for the whole process
/// (``HeldDirectorySlot/defaultPartials``).
///
/// Threading: immutable; any thread.
final class HeldDirectory: Sendable {
    /// The open directory. Valid while this object lives.
    let descriptor: Int32
    /// The directory's file system keeps nothing across a restart (tmpfs, ramfs): its files
    /// are never flushed, `fsync(2)` having no storage to wait for there.
    let isVolatile: Bool

    /// Takes ownership of `descriptor`, an open directory.
    init(descriptor: Int32) {
        self.descriptor = descriptor
        isVolatile = Self.isVolatile(descriptor)
    }

    /// Whether the file system `descriptor` lives on is held in memory only.
    private static func isVolatile(_ descriptor: Int32) -> Bool {
        switch ferry_file_system_type(descriptor) {
        case 0x0102_1994, 0x8584_58f6: true  // TMPFS_MAGIC, RAMFS_MAGIC (linux/magic.h)
        default: false
        }
    }

    deinit {
        close(descriptor)
    }
}

/// One directory kept open for everyone who asks for it by its path: the default partials
/// directory (``defaultPartials``), shared by every download in the process.
///
/// Opening and checking the directory once saves, for each file, `open`, `fstat`,
/// `geteuid`, `close` and the lookup of the path's every component (many small files spend a
/// fifth of their time in the kernel). A directory the caller chose is opened for each file
/// instead, so that Ferry never keeps one busy (a removable disk could not be unmounted).
///
/// Threading: any thread.
final class HeldDirectorySlot: Sendable {
    /// The default partials directory's slot.
    static let defaultPartials = HeldDirectorySlot()

    /// The directory held and its path (the default's changes with `TMPDIR`).
    private let held = Mutex<(path: String, directory: HeldDirectory)?>(nil)

    /// The partials directory at `path`, opened and checked once
    /// (``FileSystem/openPartialsDirectory(_:isDefault:)``) and then held.
    ///
    /// - Parameters:
    ///   - path: the directory.
    ///   - stale: a directory found removed (a file could not be created in it: a
    ///     temporary-files cleaner removed it while it stood empty). When it is the one
    ///     held, it is let go and the directory opened again (and made again, if missing).
    func partials(_ path: String, replacing stale: HeldDirectory? = nil) throws -> HeldDirectory {
        try held.withLock { held in
            if let current = held, current.path == path, current.directory !== stale { return current.directory }
            let isDefault = FileSystem.isDefaultPartialsDirectory(path)
            let directory = HeldDirectory(descriptor: try FileSystem.openPartialsDirectory(path, isDefault: isDefault))
            held = (path, directory)
            return directory
        }
    }
}
