import Foundation
import Testing

@testable import Gateway

@Suite("Gateway: answers of cacheable methods kept for a moment")
struct AnswerCacheTests {
    let path = "/storebus.catalog.v1.Catalog/FetchProducts"
    let body = Array(#"{"appBundleId":"com.example.app","productIdentifiers":["gems"]}"#.utf8)

    @Test("an answer is given again for the same request of the same app until it expires; never to another app, request or method")
    func keyedAndExpiring() {
        let answers = AnswerCache(lifetime: .seconds(1))
        let now = ContinuousClock.now
        answers.keep(Array("answer".utf8), path: path, app: "com.example.app", body: body, now: now)
        #expect(answers.answer(path: path, app: "com.example.app", body: body, now: now + .milliseconds(999)) == Array("answer".utf8))
        #expect(answers.answer(path: path, app: "com.example.app", body: body, now: now + .seconds(1)) == nil, "expired")
        #expect(answers.answer(path: path, app: "com.example.other", body: body, now: now) == nil, "another app")
        #expect(answers.answer(path: path, app: "com.example.app", body: body + [0x20], now: now) == nil, "another request")
        #expect(answers.answer(path: "/storebus.catalog.v1.Catalog/LookupProducts", app: "com.example.app", body: body, now: now) == nil, "another method")
    }

    @Test("a zero lifetime keeps nothing; large answers are not kept; the total stays bounded")
    func bounded() {
        let off = AnswerCache(lifetime: .zero)
        off.keep([1], path: path, app: "a", body: body)
        #expect(off.answer(path: path, app: "a", body: body) == nil)

        let answers = AnswerCache(lifetime: .seconds(60))
        answers.keep([UInt8](repeating: 0x61, count: AnswerCache.maxAnswerBytes + 1), path: path, app: "a", body: body)
        #expect(answers.count == 0)
        let answer = [UInt8](repeating: 0x61, count: AnswerCache.maxAnswerBytes)
        for index in 0..<(2 * AnswerCache.maxBytes / AnswerCache.maxAnswerBytes) {
            answers.keep(answer, path: path, app: "a", body: Array("\(index)".utf8))
        }
        #expect(answers.count * AnswerCache.maxAnswerBytes <= AnswerCache.maxBytes)
        #expect(answers.answer(path: path, app: "a", body: Array("\(2 * AnswerCache.maxBytes / AnswerCache.maxAnswerBytes - 1)".utf8)) == answer, "the newest is kept")
    }
}
