"""A strict reading of HTTP/1.1 request framing (RFC 9112), the smuggling test's reference.

frame(data) reads the requests on one connection's bytes and returns (requests, refusal):
requests is the list of (method, target, body) read whole before anything went wrong, refusal
None when every byte was read as whole requests, else why reading stopped. It is written here,
apart from kvgate's parser, on purpose: the two agree only if both follow the RFC.

The rules (where the RFC lets a recipient choose, this takes the strict choice):
  - lines end in CRLF; a bare CR or LF, a control byte (but HT) in a field value, a field name
    that is not a token (whitespace before the colon included) or a folded line: refused;
  - HTTP/1.1 needs exactly one Host, HTTP/1.0 at most one; Content-Length at most once, digits;
  - Transfer-Encoding at most once, HTTP/1.1 only, never with a Content-Length, and exactly
    "chunked" (any other coding list is refused, 400 or 501);
  - a chunked body: hex sizes (no sign, prefix or whitespace), optional extensions, CRLF after
    each chunk's data, trailer fields, a blank line.
"""

TCHAR = set(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
HEX = set(b"0123456789abcdefABCDEF")


class Refused(Exception):
    pass


def _line(data, at):
    """The line starting at `at` without its CRLF, and where the next starts; None if unfinished."""
    end = data.find(b"\r\n", at)
    if end < 0:
        if b"\n" in data[at:] or b"\r" in data[at:-1]:
            raise Refused("a bare CR or LF")
        return None
    line = data[at:end]
    if b"\n" in line or b"\r" in line:
        raise Refused("a bare CR or LF")
    return line, end + 2


def _field(line):
    if line[:1] in (b" ", b"\t"):
        raise Refused("a folded line")
    colon = line.find(b":")
    if colon <= 0 or any(c not in TCHAR for c in line[:colon]):
        raise Refused("a field name that is not a token")
    value = line[colon + 1:].strip(b" \t")
    if any((c < 0x20 and c != 0x09) or c == 0x7F for c in value):
        raise Refused("a control byte in a field value")
    return line[:colon].lower(), value


def _head(data, at):
    """(method, target, version, fields, body start) of the head at `at`; None if unfinished."""
    got = _line(data, at)
    if got is None:
        return None
    line, at = got
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[0] or any(c not in TCHAR for c in parts[0]) or not parts[1]:
        raise Refused("a malformed request line")
    if parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise Refused("an HTTP version other than 1.0 or 1.1")
    fields = []
    while True:
        got = _line(data, at)
        if got is None:
            return None
        line, at = got
        if line == b"":
            return parts[0], parts[1], parts[2], fields, at
        fields.append(_field(line))


def _framing(version, fields):
    """'chunked', a Content-Length, or Refused."""
    named = lambda n: [v for k, v in fields if k == n]
    hosts, lengths, codings = named(b"host"), named(b"content-length"), named(b"transfer-encoding")
    if len(hosts) > 1 or (version == b"HTTP/1.1" and not hosts):
        raise Refused("no Host or more than one")
    if any(c in b" \t,/?#@\"<>\\{}|^`" for h in hosts for c in h):
        raise Refused("a malformed Host")
    if len(lengths) > 1 or any(not v.isdigit() for v in lengths):
        raise Refused("a repeated or malformed Content-Length")
    if codings:
        if len(codings) > 1 or version != b"HTTP/1.1" or lengths:
            raise Refused("an ambiguous Transfer-Encoding")
        if codings[0].lower() != b"chunked":
            raise Refused("a coding other than chunked alone")
        return "chunked"
    return int(lengths[0]) if lengths else 0


def _chunked(data, at):
    """The decoded body and where the request ends; None if unfinished."""
    body = b""
    while True:
        got = _line(data, at)
        if got is None:
            return None
        line, at = got
        size = line.split(b";", 1)[0]
        if not size or any(c not in HEX for c in size) or len(size) > 16:
            raise Refused("a malformed chunk size")
        n = int(size, 16)
        if n == 0:
            while True:  # trailer fields, then the blank line
                got = _line(data, at)
                if got is None:
                    return None
                line, at = got
                if line == b"":
                    return body, at
                _field(line)
        if len(data) < at + n + 2:
            return None
        if data[at + n:at + n + 2] != b"\r\n":
            raise Refused("chunk data not followed by CRLF")
        body += data[at:at + n]
        at += n + 2


def frame(data):
    requests, at = [], 0
    try:
        while at < len(data):
            head = _head(data, at)
            if head is None:
                return requests, "an unfinished request"
            method, target, version, fields, at = head
            framing = _framing(version, fields)
            if framing == "chunked":
                got = _chunked(data, at)
                if got is None:
                    return requests, "an unfinished body"
                body, at = got
            else:
                if len(data) < at + framing:
                    return requests, "an unfinished body"
                body, at = data[at:at + framing], at + framing
            requests.append((method, target, body))
    except Refused as why:
        return requests, str(why)
    return requests, None
