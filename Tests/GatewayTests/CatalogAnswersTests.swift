import Foundation
import Testing
@testable import Gateway

@Suite("Gateway: FetchProducts answers kept for a moment")
struct CatalogAnswersTests {
    let body = Array(#"{"appBundleId":"com.example.app","productIdentifiers":["gems"]}"#.utf8)

    @Test("an answer is given again for the same request of the same app until it expires; never to another app or request")
    func keyedAndExpiring() {
        let answers = CatalogAnswers(lifetime: .seconds(1))
        let now = ContinuousClock.now
        answers.keep(Array("answer".utf8), app: "com.example.app", body: body, now: now)
        #expect(answers.answer(app: "com.example.app", body: body, now: now + .milliseconds(999)) == Array("answer".utf8))
        #expect(answers.answer(app: "com.example.app", body: body, now: now + .seconds(1)) == nil, "expired")
        #expect(answers.answer(app: "com.example.other", body: body, now: now) == nil, "another app")
        #expect(answers.answer(app: "com.example.app", body: body + [0x20], now: now) == nil, "another request")
    }

    @Test("a zero lifetime keeps nothing; large answers are not kept; the total stays bounded")
    func bounded() {
        let off = CatalogAnswers(lifetime: .zero)
        off.keep([1], app: "a", body: body)
        #expect(off.answer(app: "a", body: body) == nil)

        let answers = CatalogAnswers(lifetime: .seconds(60))
        answers.keep([UInt8](repeating: 0x61, count: CatalogAnswers.maxAnswerBytes + 1), app: "a", body: body)
        #expect(answers.count == 0)
        let answer = [UInt8](repeating: 0x61, count: CatalogAnswers.maxAnswerBytes)
        for index in 0..<(2 * CatalogAnswers.maxBytes / CatalogAnswers.maxAnswerBytes) {
            answers.keep(answer, app: "a", body: Array("\(index)".utf8))
        }
        #expect(answers.count * CatalogAnswers.maxAnswerBytes <= CatalogAnswers.maxBytes)
        #expect(answers.answer(app: "a", body: Array("\(2 * CatalogAnswers.maxBytes / CatalogAnswers.maxAnswerBytes - 1)".utf8)) == answer, "the newest is kept")
    }
}
