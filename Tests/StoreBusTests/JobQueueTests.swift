import Foundation
import Synchronization
import Testing

@testable import StoreBus

@Suite("Reactor job queue")
struct JobQueueTests {
    @Test("four producer threads and one consumer: every job runs once, in each producer's order")
    func concurrentProducers() async throws {
        let queue = JobQueue()
        let producers = 4, perProducer = 50_000
        let seen = Mutex<[[Int]]>(Array(repeating: [], count: producers))
        let done = DispatchGroup()
        for producer in 0..<producers {
            done.enter()
            Thread {
                for index in 0..<perProducer {
                    _ = queue.push { seen.withLock { $0[producer].append(index) } }
                }
                done.leave()
            }.start()
        }
        // The consumer drains while the producers push (the window in which the old design crashed).
        var producersFinished = false
        while true {
            for job in queue.takeAll() { job() }
            if producersFinished { break }
            producersFinished = done.wait(timeout: .now()) == .success
        }
        for job in queue.takeAll() { job() }
        let result = seen.withLock { $0 }
        for producer in 0..<producers {
            #expect(result[producer] == Array(0..<perProducer), "producer \(producer)")
        }
    }

    @Test("push reports an empty queue exactly when the consumer may be asleep")
    func pushReportsEmpty() {
        let queue = JobQueue()
        #expect(queue.push {} == true)
        #expect(queue.push {} == false)
        #expect(queue.takeAll().count == 2)
        #expect(queue.push {} == true)
    }
}
