import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A process and its descendants, found through /proc.
public enum ProcessTree {
    /// Sends SIGKILL to `root` and every process descended from it. Each is stopped (SIGSTOP) as it
    /// is found, until a look finds none more, and only then are they all killed: a supervisor
    /// killed before its children would have them handed to init, out of reach, and one that sees a
    /// child die before its own end comes starts another (pg_autoctl's does).
    public static func kill(root: pid_t?) {
        guard let root else { return }
        var tree: Set<pid_t> = [root]
        Glibc.kill(root, SIGSTOP)
        while true {
            let found = descendants(of: tree).subtracting(tree)
            guard !found.isEmpty else { break }
            for pid in found { Glibc.kill(pid, SIGSTOP) }
            tree.formUnion(found)
        }
        for pid in tree { Glibc.kill(pid, SIGKILL) }
    }

    /// Every process whose parent is in `roots`, or descends from one, as /proc shows them now.
    static func descendants(of roots: Set<pid_t>) -> Set<pid_t> {
        var parents: [pid_t: pid_t] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), let fields = ProcessStat.fields(of: pid), fields.count > 1, let parent = pid_t(fields[1]) else { continue }
            parents[pid] = parent
        }
        var tree = roots
        var grew = true
        while grew {
            grew = false
            for (pid, parent) in parents where tree.contains(parent) && !tree.contains(pid) {
                tree.insert(pid)
                grew = true
            }
        }
        return tree
    }
}
