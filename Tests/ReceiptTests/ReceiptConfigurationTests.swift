import Foundation
import Receipt
import StoreBus
import Testing

@Suite("The receipt service's settings")
struct ReceiptConfigurationTests {
    @Test("batchMilliseconds: 5 when left out, read when given, and a value outside 0 to 1000 refused, naming the setting")
    func batchWindow() throws {
        let none = try JSONDecoder().decode(ReceiptConfiguration.self, from: Data("{}".utf8))
        #expect(none.batchMilliseconds == 5)
        try none.validate()
        let off = try JSONDecoder().decode(ReceiptConfiguration.self, from: Data(#"{"batchMilliseconds": 0}"#.utf8))
        #expect(off.batchMilliseconds == 0)
        try off.validate()
        for value in [-1, 1_001] {
            let bad = try JSONDecoder().decode(ReceiptConfiguration.self, from: Data(#"{"batchMilliseconds": \#(value)}"#.utf8))
            let refused = #expect(throws: StartupError.self) { try bad.validate() }
            #expect(refused?.description.contains("service.batchMilliseconds") == true, "\(String(describing: refused))")
        }
    }
}
