#!/usr/bin/env python3
"""An app's backend following its App Store Server Notifications over the bus (docs/notifications.md).

It speaks StoreBus's wire protocol (proto-schemas/README.md) with pyzmq, authenticates to a gateway
with the app's server key, reads the app's notification log from the position it kept, verifies each
notification with Apple's app-store-server-library against StoreBus's root, and keeps the position
of the last one handled in a file (replaced atomically), so that a restart misses nothing and
handles nothing twice.  pip install pyzmq app-store-server-library

  deploy/examples/python_backend.py --gateway tcp://127.0.0.1:7300 --gateway-key data/keys/gateway.pub
"""
import argparse, base64, json, os, time
import zmq
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier

parser = argparse.ArgumentParser()
parser.add_argument("--gateway", default="tcp://127.0.0.1:7300")
parser.add_argument("--gateway-key", help="the gateway's CURVE public key file (gateway.pub); none: plain TCP")
parser.add_argument("--server-key", default=os.environ.get("STOREBUS_SERVER_KEY", "storebus-local-demo-server-key"))
parser.add_argument("--app", default="com.storebus.demo.puzzle")
parser.add_argument("--position-file", default="backend-position.json")
parser.add_argument("--count", type=int, help="stop after this many notifications")
args = parser.parse_args()

socket = zmq.Context().socket(zmq.DEALER)
socket.setsockopt(zmq.LINGER, 0)
if args.gateway_key:  # the key file holds: public-key = "<40 characters of Z85>"
    fields = dict(map(str.strip, line.split("=", 1)) for line in open(args.gateway_key) if "=" in line and not line.startswith("#"))
    socket.curve_serverkey = fields["public-key"].strip('"').encode()
    socket.curve_publickey, socket.curve_secretkey = zmq.curve_keypair()
socket.connect(args.gateway)
next_id = 0


def call(method, body, session=None, wait_ms=10000):
    """One call: returns the answer's JSON, or raises with its status code and message."""
    global next_id
    next_id += 1
    header = "SB1Q\n%d\n%d\n/%s" % (next_id, wait_ms + 5000, method) + ("\nsession: " + session if session else "")
    socket.send_multipart([b"", header.encode(), json.dumps(body).encode()])
    while socket.poll(wait_ms + 10000):
        frames = socket.recv_multipart()
        lines = frames[1].decode().split("\n") if len(frames) == 3 else []
        if len(lines) == 3 and lines[0] == "SB1R" and lines[1] == str(next_id):
            answer = json.loads(frames[2] or b"{}")
            if lines[2] != "0":
                raise RuntimeError("status %s: %s" % (lines[2], answer.get("message")))
            return answer
    raise TimeoutError(method)


session = call("storebus.gateway.v1.Gateway/Authenticate", {"apiKey": args.server_key, "appBundleId": args.app})["sessionId"]
# A root fetched over the link it checks proves little: a real backend pins the root it was given.
pem = call("storebus.notifications.v1.Notifications/GetRootCertificate", {}, session)["rootCertificatePem"]
root = base64.b64decode("".join(line for line in pem.splitlines() if not line.startswith("-----")))
verifier = SignedDataVerifier([root], False, Environment.SANDBOX, args.app)

position = json.load(open(args.position_file))["position"] if os.path.exists(args.position_file) else 0
handled = 0
while args.count is None or handled < args.count:
    try:
        page = call("storebus.notifications.v1.Notifications/ReadNotifications",
                    {"afterPosition": str(position), "waitMs": 20000, "limit": 100}, session, wait_ms=20000)
    except (RuntimeError, TimeoutError) as error:  # the gateway restarting, say: wait and read again
        print("waiting:", error)
        time.sleep(1)
        continue
    for notification in page.get("notifications", []):
        decoded = verifier.verify_and_decode_notification(notification["signedPayload"])
        transaction = decoded.data.signedTransactionInfo if decoded.data else None
        product = verifier.verify_and_decode_signed_transaction(transaction).productId if transaction else "-"
        # The backend's own work goes here (grant, extend, revoke), kept with the position.
        print(notification["position"], decoded.notificationType.value,
              decoded.subtype.value if decoded.subtype else "-", decoded.notificationUUID, product, flush=True)
        position = int(notification["position"])
        with open(args.position_file + ".tmp", "w") as file:
            json.dump({"position": position}, file)
        os.replace(args.position_file + ".tmp", args.position_file)
        handled += 1
        if args.count is not None and handled >= args.count:
            break
