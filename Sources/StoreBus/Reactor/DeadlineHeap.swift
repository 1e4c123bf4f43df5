/// A min-heap of (deadline, id) with bulk removal: the reactor's timers and the client's call
/// deadlines.
struct DeadlineHeap {
    private var heap: [(deadline: ContinuousClock.Instant, id: UInt64)] = []

    var count: Int { heap.count }

    func peek() -> (deadline: ContinuousClock.Instant, id: UInt64)? { heap.first }

    mutating func push(_ deadline: ContinuousClock.Instant, _ id: UInt64) {
        heap.append((deadline, id))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    /// Drops the entries `shouldRemove` selects and restores heap order.
    mutating func removeAll(where shouldRemove: (UInt64) -> Bool) {
        heap.removeAll { shouldRemove($0.id) }
        var index = heap.count / 2 - 1
        while index >= 0 {
            siftDown(index)
            index -= 1
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count && heap[right].deadline < heap[smallest].deadline { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
