import Foundation
import Testing
import ZeroMQ

@Suite("Held frames: received and sent on without copying their bytes")
struct HeldFrameTests {
    @Test("a held frame sent on, as a gateway forwards a chunk, reaches the next hop as the same bytes in the same buffer: no copy on the way")
    func forwardedWithoutCopy() throws {
        let context = try Context()
        defer { context.terminate() }
        // backend → forwarder → device, in-process: libzmq hands a message over without copying
        // it, so the bytes' address tells whether StoreBus copied them.
        let forwarderIn = try Socket(context: context, type: .pair)
        defer { forwarderIn.close() }
        try forwarderIn.bind("inproc://held-in")
        let backend = try Socket(context: context, type: .pair)
        defer { backend.close() }
        try backend.connect("inproc://held-in")
        let forwarderOut = try Socket(context: context, type: .pair)
        defer { forwarderOut.close() }
        try forwarderOut.bind("inproc://held-out")
        let device = try Socket(context: context, type: .pair)
        defer { device.close() }
        try device.connect("inproc://held-out")

        for size in [0, 1, 33, 34, 262_144] {
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ size) }
            let sent = HeldFrame(bytes)
            try backend.send(frames: [Array("header".utf8)], last: sent)
            let header = try forwarderIn.receiveFrame()
            #expect(header.frame == Array("header".utf8) && header.more)
            let held = try forwarderIn.receiveHeldFrame()
            #expect(!held.more)
            #expect(held.frame.count == size && held.frame.bytes == bytes)
            // Sent on twice: a held frame is not used up by sending it.
            try forwarderOut.sendFrame(held.frame, more: false)
            try forwarderOut.sendFrame(held.frame, more: false)
            let first = try device.receiveHeldFrame()
            let second = try device.receiveHeldFrame()
            #expect(first.frame == sent && second.frame == sent && first.frame.bytes == bytes)
            if size > 33 {
                // A frame of more than 33 bytes has a buffer of its own: every hop shares it.
                let address = sent.withUnsafeBytes { $0.baseAddress }
                #expect(held.frame.withUnsafeBytes { $0.baseAddress } == address, "received: \(size) bytes")
                #expect(first.frame.withUnsafeBytes { $0.baseAddress } == address, "sent on: \(size) bytes")
                #expect(second.frame.withUnsafeBytes { $0.baseAddress } == address, "sent on again: \(size) bytes")
            }
        }
    }

    @Test("a held frame outlives the socket it came on, and a send on a closed socket throws rather than taking it")
    func outlivesItsSocket() throws {
        let context = try Context()
        defer { context.terminate() }
        let receiver = try Socket(context: context, type: .pair)
        try receiver.bind("inproc://held-life")
        let sender = try Socket(context: context, type: .pair)
        defer { sender.close() }
        try sender.connect("inproc://held-life")
        let bytes = [UInt8](repeating: 0x5A, count: 100_000)
        try sender.sendFrame(HeldFrame(bytes), more: false)
        let held = try receiver.receiveHeldFrame().frame
        receiver.close()
        #expect(held.bytes == bytes)
        #expect(throws: ZMQError.self) { try receiver.sendFrame(held, more: false) }
        #expect(held.bytes == bytes)
        #expect(throws: ZMQError.self) { _ = try receiver.receiveHeldFrame(dontWait: true) }
    }
}
