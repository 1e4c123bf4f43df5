#!/usr/bin/env python3
"""Calls StoreBus's App Store Server API with Apple's own client (app-store-server-library, PyPI).

Usage: apple-server-api-check.py BASE_URL KEY_PEM KEY_ID ISSUER_ID BUNDLE_ID ROOT_DER CALL...

BASE_URL is the notification service's HTTP address (http://127.0.0.1:PORT): Apple's
AppStoreServerAPIClient is made as a backend makes it, for the sandbox, with the private key
KEY_PEM, its key id and issuer id, then pointed at BASE_URL in place of Apple's server. Each CALL
is NAME=ARGUMENT and prints one JSON line, in order:

  info=TRANSACTION_ID        get_transaction_info
  history=TRANSACTION_ID     get_transaction_history, version 2, every page
  history_v1=TRANSACTION_ID  the same, version 1
  refunds=TRANSACTION_ID     get_refund_history, every page
  statuses=TRANSACTION_ID    get_all_subscription_statuses
  extend=ORIGINAL:REQUEST:DAYS
                             extend_subscription_renewal_date by DAYS, request identifier REQUEST
  test=                      request_test_notification, then get_test_notification_status
  notifications=START_MS     get_notification_history from START_MS to now, every page

A line is {"ok": true, ...} with every signed item verified by SignedDataVerifier (StoreBus's root
in place of Apple's, online checks off) and decoded, or {"ok": false, "status": HTTP status,
"errorCode": Apple's error code}.
"""
import json
import sys
import time

import attr

from appstoreserverlibrary.api_client import APIException, AppStoreServerAPIClient, GetTransactionHistoryVersion
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.models.ExtendReasonCode import ExtendReasonCode
from appstoreserverlibrary.models.ExtendRenewalDateRequest import ExtendRenewalDateRequest
from appstoreserverlibrary.models.NotificationHistoryRequest import NotificationHistoryRequest
from appstoreserverlibrary.models.TransactionHistoryRequest import TransactionHistoryRequest
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier


def plain(value):
    """An attrs model as JSON-ready values: enums by their values, the *Raw twins left out."""
    if attr.has(type(value)):
        names = (field.name for field in attr.fields(type(value)))
        return {name: plain(getattr(value, name)) for name in names if not name.endswith("Raw") and getattr(value, name) is not None}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return getattr(value, "value", value)


def history(client, verifier, transaction_id, version):
    transactions, revision, pages = [], None, 0
    while True:
        response = client.get_transaction_history(transaction_id, revision, TransactionHistoryRequest(), version)
        pages += 1
        transactions += [plain(verifier.verify_and_decode_signed_transaction(jws)) for jws in response.signedTransactions or []]
        revision = response.revision
        if not response.hasMore:
            return {"transactions": transactions, "pages": pages, "environment": plain(response.environment), "bundleId": response.bundleId}


def call(client, verifier, name, argument):
    if name == "info":
        return {"transaction": plain(verifier.verify_and_decode_signed_transaction(client.get_transaction_info(argument).signedTransactionInfo))}
    if name == "history":
        return history(client, verifier, argument, GetTransactionHistoryVersion.V2)
    if name == "history_v1":
        return history(client, verifier, argument, GetTransactionHistoryVersion.V1)
    if name == "refunds":
        transactions, revision = [], None
        while True:
            response = client.get_refund_history(argument, revision)
            transactions += [plain(verifier.verify_and_decode_signed_transaction(jws)) for jws in response.signedTransactions or []]
            revision = response.revision
            if not response.hasMore:
                return {"transactions": transactions}
    if name == "statuses":
        response = client.get_all_subscription_statuses(argument)
        groups = []
        for group in response.data or []:
            items = []
            for item in group.lastTransactions or []:
                items.append({
                    "status": plain(item.status),
                    "originalTransactionId": item.originalTransactionId,
                    "transaction": plain(verifier.verify_and_decode_signed_transaction(item.signedTransactionInfo)),
                    "renewal": plain(verifier.verify_and_decode_renewal_info(item.signedRenewalInfo)),
                })
            groups.append({"subscriptionGroupIdentifier": group.subscriptionGroupIdentifier, "lastTransactions": items})
        return {"groups": groups, "environment": plain(response.environment)}
    if name == "extend":
        original, request_id, days = argument.split(":")
        request = ExtendRenewalDateRequest(extendByDays=int(days), extendReasonCode=ExtendReasonCode.CUSTOMER_SATISFACTION, requestIdentifier=request_id)
        return {"extended": plain(client.extend_subscription_renewal_date(original, request))}
    if name == "test":
        token = client.request_test_notification().testNotificationToken
        status = client.get_test_notification_status(token)
        notification = plain(verifier.verify_and_decode_notification(status.signedPayload))
        return {"token": token, "notification": notification, "sendAttempts": plain(status.sendAttempts or [])}
    if name == "notifications":
        items, token = [], None
        request = NotificationHistoryRequest(startDate=int(argument), endDate=int(time.time() * 1000) + 1000)
        while True:
            response = client.get_notification_history(token, request)
            for item in response.notificationHistory or []:
                items.append({"notification": plain(verifier.verify_and_decode_notification(item.signedPayload)),
                              "sendAttempts": plain(item.sendAttempts or [])})
            token = response.paginationToken
            if not response.hasMore:
                return {"notifications": items}
    raise ValueError(f"unknown call {name}")


def main() -> None:
    base_url, key_path, key_id, issuer_id, bundle_id, root_path, *calls = sys.argv[1:]
    with open(key_path, "rb") as file:
        key = file.read()
    with open(root_path, "rb") as file:
        root = file.read()
    client = AppStoreServerAPIClient(key, key_id, issuer_id, bundle_id, Environment.SANDBOX)
    # The one change a backend makes to talk to StoreBus: its base URL.
    client._base_url = base_url
    verifier = SignedDataVerifier([root], False, Environment.SANDBOX, bundle_id)
    for spec in calls:
        name, _, argument = spec.partition("=")
        try:
            print(json.dumps({"ok": True, "call": name, **call(client, verifier, name, argument)}, default=str), flush=True)
        except APIException as error:
            print(json.dumps({"ok": False, "call": name, "status": error.http_status_code, "errorCode": error.raw_api_error}), flush=True)


if __name__ == "__main__":
    main()
