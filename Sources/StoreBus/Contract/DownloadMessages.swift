import StoreSchema
import SwiftProtobuf

/// The Download requests that name downloads of a queue (start, pause, resume, cancel): one shape
/// under four names.
public protocol DownloadsRequest: SwiftProtobuf.Message, Sendable {
    var queue: Storebus_PaymentQueue_V1_QueueRef { get set }
    var downloads: [Storebus_Download_V1_DownloadRef] { get set }
}

/// Their answers: the downloads' statuses, in the order asked.
public protocol DownloadsResponse: SwiftProtobuf.Message, Sendable {
    var downloads: [Storebus_Download_V1_DownloadStatus] { get set }
}

/// The answers of the requests that make downloads active (start, resume), with the queue position
/// their statuses are as of.
public protocol BeginDownloadsResponse: DownloadsResponse {
    var keySeq: UInt64 { get set }
}

extension Storebus_Download_V1_StartDownloadsRequest: DownloadsRequest {}
extension Storebus_Download_V1_PauseDownloadsRequest: DownloadsRequest {}
extension Storebus_Download_V1_ResumeDownloadsRequest: DownloadsRequest {}
extension Storebus_Download_V1_CancelDownloadsRequest: DownloadsRequest {}
extension Storebus_Download_V1_StartDownloadsResponse: BeginDownloadsResponse {}
extension Storebus_Download_V1_ResumeDownloadsResponse: BeginDownloadsResponse {}
extension Storebus_Download_V1_PauseDownloadsResponse: DownloadsResponse {}
extension Storebus_Download_V1_CancelDownloadsResponse: DownloadsResponse {}
