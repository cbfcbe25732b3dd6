/* The batch reader's reads in C: every ready socket of an epoll set read once, kernel-stamped, its
 * HTTP/1.1 chunked framing taken off (llmload/client/chunked_reader.py says why and what is measured).
 *
 * poll(epfd, decoders, bufsize) -> list of (fd, t, delay, body, code), one for each ready socket:
 *   t      the client's monotonic clock after the read (time.perf_counter's clock, CLOCK_MONOTONIC)
 *   delay  seconds from the kernel's receive stamp (SO_TIMESTAMPNS) to the wall clock after the read,
 *          or -1.0: no stamp, or one outside [0, 60) s (the wall clock was stepped)
 *   body   the body bytes the read completed (b"" when it held only framing)
 *   code   MORE 0, END 1 (the last chunk and its trailers came), EOF 2 (the peer closed), AGAIN 3 (no
 *          data: the socket polled ready for its error queue), BAD 4 (not chunked framing),
 *          FOREIGN 5 (fd has no decoder: the caller reads it), or -errno (the read failed)
 * A decoder is Decoder(): the state of one body's chunked framing, from its first size line.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#define SO_TIMESTAMPNS_ 35
#define MAX_EVENTS 1024

enum { MORE = 0, END = 1, EOF_ = 2, AGAIN = 3, BAD = 4, FOREIGN = 5 };
enum { S_SIZE, S_EXT, S_SIZE_LF, S_DATA, S_DATA_CR, S_DATA_LF, S_TRAILER, S_TRAILER_LINE, S_TRAILER_LF, S_END_LF, S_DONE };

typedef struct {
    PyObject_HEAD
    int state;
    int digits;
    unsigned long long left; /* data bytes left in the current chunk, or the size being read */
} Decoder;

static PyTypeObject DecoderType;

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Take the framing off buf[0:n] in place; *out gets the body's length. Returns MORE, END or BAD. */
static int decode(Decoder *d, char *buf, Py_ssize_t n, Py_ssize_t *out) {
    Py_ssize_t i = 0, o = 0;
    while (i < n) {
        unsigned char c = (unsigned char)buf[i];
        switch (d->state) {
        case S_SIZE: {
            int v = hexval(c);
            if (v >= 0) {
                if (++d->digits > 15) return BAD;
                d->left = d->left * 16 + (unsigned)v;
            } else if (d->digits == 0) {
                return BAD;
            } else if (c == '\r') {
                d->state = S_SIZE_LF;
            } else if (c == ';' || c == ' ' || c == '\t') {
                d->state = S_EXT;
            } else {
                return BAD;
            }
            i++;
            break;
        }
        case S_EXT:
            if (c == '\r') d->state = S_SIZE_LF;
            i++;
            break;
        case S_SIZE_LF:
            if (c != '\n') return BAD;
            i++;
            d->state = d->left ? S_DATA : S_TRAILER;
            break;
        case S_DATA: {
            Py_ssize_t take = n - i;
            if ((unsigned long long)take > d->left) take = (Py_ssize_t)d->left;
            if (o != i) memmove(buf + o, buf + i, (size_t)take);
            o += take;
            i += take;
            d->left -= (unsigned long long)take;
            if (!d->left) d->state = S_DATA_CR;
            break;
        }
        case S_DATA_CR:
            if (c != '\r') return BAD;
            i++;
            d->state = S_DATA_LF;
            break;
        case S_DATA_LF:
            if (c != '\n') return BAD;
            i++;
            d->state = S_SIZE;
            d->digits = 0;
            d->left = 0;
            break;
        case S_TRAILER: /* at a line's start after the last chunk: an empty line ends the body */
            i++;
            d->state = c == '\r' ? S_END_LF : S_TRAILER_LINE;
            break;
        case S_TRAILER_LINE:
            if (c == '\r') d->state = S_TRAILER_LF;
            i++;
            break;
        case S_TRAILER_LF:
            if (c != '\n') return BAD;
            i++;
            d->state = S_TRAILER;
            break;
        case S_END_LF:
            if (c != '\n') return BAD;
            i++;
            d->state = S_DONE;
            break;
        default: /* S_DONE: bytes past the body's end */
            return BAD;
        }
    }
    *out = o;
    return d->state == S_DONE ? END : MORE;
}

static PyObject *Decoder_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    Decoder *d = (Decoder *)type->tp_alloc(type, 0);
    if (d) {
        d->state = S_SIZE;
        d->digits = 0;
        d->left = 0;
    }
    return (PyObject *)d;
}

static PyObject *Decoder_feed(Decoder *d, PyObject *arg) {
    /* The framing of bytes read elsewhere (tests; body bytes that came with the headers): (body, code) */
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    char *copy = PyMem_Malloc(view.len ? (size_t)view.len : 1);
    if (!copy) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    memcpy(copy, view.buf, (size_t)view.len);
    Py_ssize_t out = 0;
    int code = decode(d, copy, view.len, &out);
    PyBuffer_Release(&view);
    PyObject *res = Py_BuildValue("(y#i)", copy, code == BAD ? (Py_ssize_t)0 : out, code);
    PyMem_Free(copy);
    return res;
}

static PyObject *Decoder_ended(Decoder *d, void *closure) { return PyBool_FromLong(d->state == S_DONE); }

static PyMethodDef Decoder_methods[] = {
    {"feed", (PyCFunction)Decoder_feed, METH_O, "Take the framing off bytes read elsewhere: (body, code)."},
    {NULL}};
static PyGetSetDef Decoder_getset[] = {{"ended", (getter)Decoder_ended, NULL, "the body's end came", NULL}, {NULL}};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "llmload.client._chunked.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The state of one body's HTTP/1.1 chunked framing.",
    .tp_new = Decoder_new,
    .tp_methods = Decoder_methods,
    .tp_getset = Decoder_getset,
};

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One read of fd: (fd, t, delay, body, code) */
static PyObject *read_one(int fd, Decoder *d, char *buf, Py_ssize_t bufsize) {
    struct iovec iov = {buf, (size_t)bufsize};
    union {
        char space[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } control;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.space;
    msg.msg_controllen = sizeof control.space;
    ssize_t got;
    do {
        got = recvmsg(fd, &msg, MSG_DONTWAIT);
    } while (got < 0 && errno == EINTR);
    double wall = seconds(CLOCK_REALTIME); /* first, then the monotonic clock: a pause only makes it late */
    double t = seconds(CLOCK_MONOTONIC);
    if (got < 0) {
        int code = (errno == EAGAIN || errno == EWOULDBLOCK) ? AGAIN : -errno;
        return Py_BuildValue("(iddy#i)", fd, t, -1.0, "", (Py_ssize_t)0, code);
    }
    double delay = -1.0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS_ &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            double k = wall - ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
            if (k >= 0.0 && k < 60.0) delay = k;
            break;
        }
    }
    if (got == 0) return Py_BuildValue("(iddy#i)", fd, t, delay, "", (Py_ssize_t)0, EOF_);
    Py_ssize_t out = 0;
    int code = decode(d, buf, (Py_ssize_t)got, &out);
    if (code == BAD) out = 0;
    return Py_BuildValue("(iddy#i)", fd, t, delay, buf, out, code);
}

static PyObject *chunked_poll(PyObject *self, PyObject *args) {
    int epfd;
    PyObject *decoders;
    Py_ssize_t bufsize;
    if (!PyArg_ParseTuple(args, "iO!n", &epfd, &PyDict_Type, &decoders, &bufsize)) return NULL;
    if (bufsize < 1) bufsize = 1;
    struct epoll_event events[MAX_EVENTS];
    int n = epoll_wait(epfd, events, MAX_EVENTS, 0);
    if (n < 0) {
        if (errno == EINTR) return PyList_New(0);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    char *buf = NULL;
    for (int k = 0; k < n; k++) {
        int fd = events[k].data.fd;
        PyObject *key = PyLong_FromLong(fd);
        if (!key) goto fail;
        PyObject *d = PyDict_GetItemWithError(decoders, key); /* borrowed */
        Py_DECREF(key);
        PyObject *item;
        if (d == NULL) {
            if (PyErr_Occurred()) goto fail;
            item = Py_BuildValue("(iddy#i)", fd, 0.0, -1.0, "", (Py_ssize_t)0, FOREIGN);
        } else if (!PyObject_TypeCheck(d, &DecoderType)) {
            PyErr_SetString(PyExc_TypeError, "decoders holds a value that is no Decoder");
            goto fail;
        } else {
            if (!buf && !(buf = PyMem_Malloc((size_t)bufsize))) {
                PyErr_NoMemory();
                goto fail;
            }
            item = read_one(fd, (Decoder *)d, buf, bufsize);
        }
        if (!item) goto fail;
        PyList_SET_ITEM(out, k, item);
    }
    PyMem_Free(buf);
    return out;
fail:
    PyMem_Free(buf);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"poll", chunked_poll, METH_VARARGS, "Read every ready socket of an epoll set once: [(fd, t, delay, body, code)]."},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_chunked", NULL, -1, methods};

PyMODINIT_FUNC PyInit__chunked(void) {
    if (PyType_Ready(&DecoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&DecoderType);
    if (PyModule_AddObject(m, "Decoder", (PyObject *)&DecoderType) < 0) {
        Py_DECREF(&DecoderType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "MORE", MORE);
    PyModule_AddIntConstant(m, "END", END);
    PyModule_AddIntConstant(m, "EOF_", EOF_);
    PyModule_AddIntConstant(m, "AGAIN", AGAIN);
    PyModule_AddIntConstant(m, "BAD", BAD);
    PyModule_AddIntConstant(m, "FOREIGN", FOREIGN);
    return m;
}
