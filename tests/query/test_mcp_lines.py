"""`fabric mcp` over stdio answers a line that is not a JSON-RPC message (the SDK drops it):
Parse error or Invalid Request, with the request's id where it has a usable one."""

from __future__ import annotations

import anyio
import mcp_types
import pytest
from mcp.shared.message import SessionMessage

from fabric_query.server.mcp_tools import CappedLines, _AnswerBadLines, bad_line_error


#: A tools/call's params (one without is answered at once: it names no tool).
STATUS = {"name": "status", "arguments": {}}


def _error(line: str):
    try:
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:  # noqa: BLE001 - what the SDK's stdio reader hands on
        return bad_line_error(exc)
    pytest.fail(f"{line!r} is a message")


@pytest.mark.parametrize(("line", "code", "request_id"), [
    ('{"jsonrpc": "2.0", "id": 3, "method": ', mcp_types.PARSE_ERROR, None),
    ("[" * 100_000 + "]" * 100_000, mcp_types.PARSE_ERROR, None),
    ("\ufffd\ufffd", mcp_types.PARSE_ERROR, None),
    ('[{"jsonrpc": "2.0", "id": 4, "method": "ping"}]', mcp_types.INVALID_REQUEST, None),
    ('{"id": 21, "method": "tools/list"}', mcp_types.INVALID_REQUEST, 21),
    ('{"id": "a", "method": 5}', mcp_types.INVALID_REQUEST, "a"),
    ('{"id": true, "method": "ping"}', mcp_types.INVALID_REQUEST, None),
    ('"just a string"', mcp_types.INVALID_REQUEST, None),
    # Half a character (trial 14b): was Parse error with id null, so the client waited for ever.
    ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", '
     '"arguments": {"query": "lamp \\ud83d"}}}', mcp_types.INVALID_REQUEST, 7),
    ('{"jsonrpc": "2.0", "id": "r", "method": "ping", "params": {"x": ["\\udfff"]}}', mcp_types.INVALID_REQUEST, "r"),
])
def test_bad_lines_are_json_rpc_errors(line, code, request_id):
    error = _error(line)
    assert (error.error.code, error.id) == (code, request_id)
    if "\\ud" in line:
        assert "half of a character (a lone surrogate)" in error.error.message, error.error.message


def test_a_blank_line_is_not_answered():
    assert _error("\n") is None and _error("   ") is None


def test_the_read_stream_answers_bad_lines_and_passes_messages_on():
    async def main():
        inbound_send, inbound = anyio.create_memory_object_stream(10)
        outbound, outbound_read = anyio.create_memory_object_stream(10)
        ping = SessionMessage(mcp_types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))
        try:
            mcp_types.jsonrpc_message_adapter.validate_json("{", by_name=False)
        except Exception as exc:  # noqa: BLE001
            await inbound_send.send(exc)
        await inbound_send.send(ping)
        await inbound_send.aclose()
        received = [item async for item in _AnswerBadLines(inbound, outbound)]
        assert received == [ping]
        assert outbound_read.receive_nowait().message.error.code == mcp_types.PARSE_ERROR

    anyio.run(main)


def test_the_end_of_stdin_is_passed_on_once_every_request_read_is_answered():
    """guards against (trial 20a): stdin closed while a tool call ran ending the SDK's loop at once,
    which cancels the calls in flight: the client got "Connection closed", not its answer. A
    request the client cancelled is answered by no one: it must not hold the end back."""
    async def main():
        inbound_send, inbound = anyio.create_memory_object_stream(10)
        outbound, _ = anyio.create_memory_object_stream(10)
        reads = _AnswerBadLines(inbound, outbound)
        for message in (mcp_types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params=STATUS),
                        mcp_types.JSONRPCRequest(jsonrpc="2.0", id="c", method="tools/call", params=STATUS),
                        mcp_types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled",
                                                      params={"requestId": "c"})):
            await inbound_send.send(SessionMessage(message))
        await inbound_send.aclose()
        assert [(await reads.receive()).message.method for _ in range(3)] == [
            "tools/call", "tools/call", "notifications/cancelled"]
        ended = []

        async def read_to_the_end():
            with pytest.raises(anyio.EndOfStream):
                await reads.receive()
            ended.append(True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_to_the_end)
            await anyio.wait_all_tasks_blocked()
            assert ended == []  # request 1 is still running
            reads.answered(mcp_types.JSONRPCResponse(jsonrpc="2.0", id=1, result={}))
        assert ended == [True]

    anyio.run(main)


def test_a_request_never_answered_holds_the_end_of_stdin_back_only_so_long(monkeypatch):
    """guards against: a request the SDK never answers keeping ``fabric mcp`` alive for good after
    its client closed stdin (the wait for answers is bounded by ``EOF_ANSWER_WAIT_S``)."""
    from fabric_query.server import mcp_tools

    monkeypatch.setattr(mcp_tools, "EOF_ANSWER_WAIT_S", 0.05)

    async def main():
        inbound_send, inbound = anyio.create_memory_object_stream(10)
        outbound, _ = anyio.create_memory_object_stream(10)
        reads = _AnswerBadLines(inbound, outbound)
        await inbound_send.send(SessionMessage(mcp_types.JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/call",
                                                                            params=STATUS)))
        await inbound_send.aclose()
        await reads.receive()
        with anyio.fail_after(30):  # the bound, not this, must end the wait
            with pytest.raises(anyio.EndOfStream):
                await reads.receive()

    anyio.run(main)


def test_a_line_past_the_limit_is_skipped_to_its_end_and_answered():
    """A line with no end was held whole (200 MB written without a newline grew `fabric mcp` by
    170 MB); it is read in pieces and dropped now, and the next line is read as usual."""
    import io

    lines = CappedLines(io.BytesIO(b"y" * 1_000_000 + b'\n{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n'), 64)
    too_long = lines.readline()
    assert len(too_long) < 64 and _error(too_long).error.message == (
        "Parse error: the line has more than 64 bytes, the most read")
    assert mcp_types.jsonrpc_message_adapter.validate_json(lines.readline(), by_name=False).id == 1
    assert lines.readline() == ""


def test_a_line_of_exactly_the_limit_is_read():
    import io

    line = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n'
    assert CappedLines(io.BytesIO(line), len(line) - 1).readline() == line.decode()


@pytest.mark.parametrize("request_id", ["null", "true", "1.5", "[1]", '{"a": 1}'])
def test_a_request_with_an_id_mcp_does_not_allow_is_answered_invalid_request(request_id):
    """guards against: a request whose id is null, a boolean, a float, an array or an object read
    by the SDK as a notification (it drops the id) and never answered: its sender waited for ever.
    A notification (no id) and a usable id pass through unchanged."""
    import io

    bad = f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "ping"}}\n'.encode()
    good = [b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
            b'{"jsonrpc": "2.0", "id": "x", "method": "ping"}\n', b'{"jsonrpc": "2.0", "id": 0, "method": "ping"}\n',
            b"{" * 50_000 + b"\n"]
    lines = CappedLines(io.BytesIO(bad + b"".join(good)), 1 << 20)
    error = _error(lines.readline())
    assert (error.error.code, error.id) == (mcp_types.INVALID_REQUEST, None)
    assert [lines.readline() for _ in good] == [g.decode() for g in good]


@pytest.mark.parametrize(("line", "reason"), [
    (b'{"jsonrpc": "2.0", "id": 13, "id": 14, "method": "ping"}', "duplicate key 'id'"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search", '
     b'"arguments": {"query": "caf\xe9", "query": "x"}}}', "not UTF-8, -16 or -32 text: invalid continuation byte at byte {at}"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search", '
     b'"arguments": {"query": "\xff lamp"}}}', "not UTF-8, -16 or -32 text: invalid start byte at byte {at}"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"n": ' + b"1" * 5000 + b"}}",
     "a number has more than 4300 digits"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"n": ' + b"[" * 5000 + b"]" * 5000 + b"}}",
     "arrays or objects nest too deeply"),
])
def test_a_line_the_http_endpoint_refuses_is_refused_over_stdio_with_the_same_reason(line, reason):
    """guards against (hostile trial 20d): ``fabric mcp`` reading lines that ``/mcp`` refuses
    (its guard, :func:`~fabric_query.server.wire.unreadable_json`) as something else: a request
    naming ``id`` twice answered under its last id, a query holding bytes that are not UTF-8
    searched with U+FFFD in their place, and a number of 5,000 digits or nesting 5,000 deep answered
    "the line is not JSON". Each is now the Parse error naming why, as over HTTP; the next line is
    read as usual."""
    import io

    lines = CappedLines(io.BytesIO(line + b'\n{"jsonrpc": "2.0", "id": 2, "method": "ping"}\n'), 1 << 20)
    error = _error(lines.readline())
    assert (error.error.code, error.id) == (mcp_types.PARSE_ERROR, None)
    at = next((i for i, b in enumerate(line) if b > 0x7F), None)  # the first byte that is not ASCII
    assert error.error.message == f"Parse error: {reason.format(at=at)}"
    assert mcp_types.jsonrpc_message_adapter.validate_json(lines.readline(), by_name=False).id == 2


def test_a_tool_call_whose_params_cannot_be_read_is_answered_naming_the_field_as_over_http():
    """guards against (trial 24b): ``fabric mcp`` answering a ``tools/call`` whose ``arguments`` were
    a string, or whose ``name`` was a number, -32602 "Invalid request parameters" with empty data.
    Now the read stream answers it naming the field, as ``/mcp`` does, and passes the next message on."""
    async def main():
        inbound_send, inbound = anyio.create_memory_object_stream(10)
        outbound, outbound_read = anyio.create_memory_object_stream(10)
        for request_id, params in ((1, {"name": "search", "arguments": "x"}), (2, {"name": 5})):
            await inbound_send.send(SessionMessage(mcp_types.JSONRPCRequest(
                jsonrpc="2.0", id=request_id, method="tools/call", params=params)))
        fine = SessionMessage(mcp_types.JSONRPCRequest(jsonrpc="2.0", id=3, method="tools/call",
                                                       params={"name": "search", "arguments": {"query": "a"}}))
        await inbound_send.send(fine)
        await inbound_send.aclose()
        reads = _AnswerBadLines(inbound, outbound)
        assert await reads.receive() == fine
        return [outbound_read.receive_nowait().message for _ in range(2)]

    first, second = anyio.run(main)
    assert (first.id, first.error.code, second.id, second.error.code) == (1, -32602, 2, -32602)
    assert first.error.message.startswith("Invalid params: params.arguments takes an object, not a string")
    assert second.error.message.startswith("Invalid params: params.name takes a string, not an integer")
