import Foundation

extension ResumeStore {
    /// One key's entry in a store, with the entry file's name worked out once.
    ///
    /// A download claims its key's entry, asks it for resume data, may save to it at every
    /// checkpoint and removes it at the end: each of those through one slot, where naming the
    /// file again for each call (a hash, a name and a URL) cost a list of small downloads
    /// about twenty allocations per file.
    struct Slot: Sendable {
        let store: ResumeStore
        let key: String
        /// The entry's file, when the store keeps files.
        let file: URL?

        /// The resume data stored here, if any and valid.
        func resumeData() -> ResumeData? {
            guard let file else { return store.storage?.resumeData(for: key) }
            return store.entry(for: key, in: file, field: "resumeData").flatMap { try? ResumeData(decoding: $0) }
        }

        /// Stores `resumeData` here, replacing what was there.
        func save(_ resumeData: ResumeData) throws {
            guard let file, let directory = store.directory else {
                try store.storage?.save(resumeData, for: key)
                return
            }
            try store.write(Entry(key: key, resumeData: resumeData), to: file, in: directory)
        }

        /// Removes what is stored here.
        func remove() {
            guard let file else { return store.storage?.remove(key) ?? () }
            FileSystem.removeIfPresent(file)
        }
    }

    /// The entry of `key`.
    func slot(for key: String) -> Slot {
        Slot(store: self, key: key, file: directory.map { fileURL(for: key, in: $0) })
    }
}
