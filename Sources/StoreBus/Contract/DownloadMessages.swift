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

extension Storebus_PaymentQueue_V1_DownloadState {
    /// The state `action` moves a download in this state to, or nil when the action is not allowed
    /// here (the contract's DownloadAction): START from WAITING, PAUSED or FAILED; PAUSE from WAITING
    /// or ACTIVE; RESUME from PAUSED or FAILED; CANCEL from anything but FINISHED; COMPLETE and FAIL
    /// from ACTIVE. The target state itself is always allowed (and changes nothing).
    public func after(_ action: Storebus_PaymentQueue_V1_DownloadAction) -> Storebus_PaymentQueue_V1_DownloadState? {
        switch (action, self) {
        case (.start, .waiting), (.start, .paused), (.start, .failed), (.start, .active): return .active
        case (.resume, .paused), (.resume, .failed), (.resume, .active): return .active
        case (.pause, .waiting), (.pause, .active), (.pause, .paused): return .paused
        case (.cancel, let state) where state != .finished: return .cancelled
        case (.complete, .active), (.complete, .finished): return .finished
        case (.fail, .active), (.fail, .failed): return .failed
        default: return nil
        }
    }
}
