#!/usr/bin/env python3
"""Checks StoreBus's signed data with Apple's own App Store Server Library (PyPI).

Usage: apple-library-check.py ROOT_DER BUNDLE_ID [--transaction JWS]... [--renewal JWS]...
       [--notification JWS]... [--receipt BASE64]...

Each --transaction (a JWSTransactionDecodedPayload), --renewal (a JWSRenewalInfoDecodedPayload) and
--notification (an App Store Server Notification's signedPayload, ResponseBodyV2DecodedPayload) is
verified with SignedDataVerifier (StoreBus's root in place of Apple's, online checks off,
environment Sandbox) and printed as one JSON line: {"ok": true, "payload": {...}} or
{"ok": false, "error": "..."}. A notification's payload also gives the transaction and renewal
info it carries, each verified the same way ("transaction", "renewal"). Each --receipt is read with ReceiptUtility, which prints the
transaction id it finds: {"ok": true, "transactionId": "..."}. The receipt tests run it.
"""
import json
import sys

import attr

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.receipt_utility import ReceiptUtility
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier


def plain(value):
    """An attrs model as JSON-ready values: enums by their values, the *Raw twins left out."""
    if attr.has(type(value)):
        names = (field.name for field in attr.fields(type(value)))
        return {name: plain(getattr(value, name)) for name in names if not name.endswith("Raw") and getattr(value, name) is not None}
    return getattr(value, "value", value)


def main() -> None:
    root_path, bundle_id, *rest = sys.argv[1:]
    with open(root_path, "rb") as file:
        root = file.read()
    verifier = SignedDataVerifier([root], False, Environment.SANDBOX, bundle_id)
    pairs = list(zip(rest[0::2], rest[1::2]))
    for kind, value in pairs:
        try:
            if kind in ("--transaction", "--renewal"):
                if kind == "--transaction":
                    decoded = verifier.verify_and_decode_signed_transaction(value)
                else:
                    decoded = verifier.verify_and_decode_renewal_info(value)
                fields = (field.name for field in attr.fields(type(decoded)))
                values = {name: getattr(decoded, name) for name in fields if not name.endswith("Raw")}
                payload = {name: getattr(value, "value", value) for name, value in values.items() if value is not None}
                print(json.dumps({"ok": True, "payload": payload}, default=str))
            elif kind == "--notification":
                decoded = verifier.verify_and_decode_notification(value)
                payload = plain(decoded)
                data = decoded.data
                if data is not None and data.signedTransactionInfo:
                    payload["transaction"] = plain(verifier.verify_and_decode_signed_transaction(data.signedTransactionInfo))
                if data is not None and data.signedRenewalInfo:
                    payload["renewal"] = plain(verifier.verify_and_decode_renewal_info(data.signedRenewalInfo))
                print(json.dumps({"ok": True, "payload": payload}, default=str))
            elif kind == "--receipt":
                print(json.dumps({"ok": True, "transactionId": ReceiptUtility().extract_transaction_id_from_app_receipt(value)}))
            else:
                raise SystemExit(f"unknown argument {kind}")
        except Exception as error:  # the verifier's VerificationException, or a parse error
            print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {getattr(error, 'status', error)}"}))


if __name__ == "__main__":
    main()
