#ifndef STOREBUS_CZEROMQ_SHIM_H
#define STOREBUS_CZEROMQ_SHIM_H
// libzmq 4.3.x from Debian's libzmq3-dev. The draft API (zmq_poller_*, thread-safe sockets) is not
// built into Debian's library, so nothing here defines ZMQ_BUILD_DRAFT_API.
#include <zmq.h>
#include <errno.h>

// libzmq's own errno values are macros built from ZMQ_HAUSNUMERO, which Swift does not import.
static const int storebus_zmq_eterm = ETERM;
static const int storebus_zmq_efsm = EFSM;
static const int storebus_zmq_emthread = EMTHREAD;

// Linux's SCHED_BATCH policy (3 in the kernel's ABI), which glibc's <sched.h> shows only under
// _GNU_SOURCE: the policy the context asks libzmq to give its I/O threads.
static const int storebus_sched_batch = 3;
#endif
