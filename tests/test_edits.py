"""Reply parsing: whole files, SEARCH/REPLACE edits, and errors the model can act on."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from porter.agent.edits import apply_reply, format_instructions

KERNEL = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<4>;

	ld.param.u64 	%rd1, [k_param_0];
	mov.u32 	%r1, %tid.x;
	shl.b32 	%r2, %r1, 2;
	add.s32 	%r3, %r2, 1;
	st.global.u32 	[%rd1], %r3;
	add.s32 	%r3, %r2, 1;
	ret;
}
"""


def edit(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


# --- whole files ------------------------------------------------------------------------------


def test_whole_file_in_a_ptx_fence() -> None:
    new = KERNEL.replace("sm_90a", "sm_100a")
    out = apply_reply(KERNEL, f"Retargeted.\n\n```ptx\n{new}```\n\nDone.")
    assert out.ok and out.kind == "whole" and out.text == new and out.error_kind is None


def test_whole_file_in_a_fence_without_language_and_the_largest_block_wins() -> None:
    new = KERNEL.replace("shl.b32 \t%r2, %r1, 2;", "shl.b32 \t%r2, %r1, 3;")
    reply = f"The change:\n```ptx\n\tshl.b32 \t%r2, %r1, 3;\n```\nThe kernel:\n```\n{new}```\n"
    out = apply_reply(KERNEL, reply)
    assert out.ok and out.text == new


def test_crlf_replies_are_read() -> None:
    out = apply_reply(KERNEL, "```ptx\r\n" + KERNEL.replace("\n", "\r\n") + "```\r\n")
    assert out.ok and out.text == KERNEL


def test_unterminated_fence_is_truncated() -> None:
    out = apply_reply(KERNEL, "```ptx\n" + KERNEL[:200])
    assert not out.ok and out.error_kind == "truncated" and out.text == KERNEL and "cut off" in out.error


def test_unbalanced_braces_are_truncated() -> None:
    cut = KERNEL.rsplit("}", 1)[0]  # the entry's closing brace is missing
    out = apply_reply(KERNEL, f"```ptx\n{cut}\n```")
    assert out.error_kind == "truncated" and "1 brace(s)" in out.error


def test_braces_in_comments_do_not_count() -> None:
    new = KERNEL.replace("ret;", "ret; // { not a scope\n\t/* } nor { this */")
    assert apply_reply(KERNEL, f"```ptx\n{new}```").ok


def test_token_limit_flag_is_truncated() -> None:
    out = apply_reply(KERNEL, f"```ptx\n{KERNEL}```", truncated=True)
    assert not out.ok and out.error_kind == "truncated" and out.kind == "whole"


def test_no_code_explains_the_format() -> None:
    out = apply_reply(KERNEL, "I think the kernel should use tcgen05 instead.")
    assert not out.ok and out.error_kind == "no-code" and out.kind is None
    assert "```ptx" in out.error and "<<<<<<< SEARCH" in out.error


def test_unfenced_ptx_and_partial_ptx_blocks_are_malformed() -> None:
    assert apply_reply(KERNEL, KERNEL).error_kind == "malformed"
    out = apply_reply(KERNEL, "```ptx\n\tshl.b32 \t%r2, %r1, 3;\n```")
    assert out.error_kind == "malformed" and "not a whole kernel" in out.error


# --- SEARCH/REPLACE ---------------------------------------------------------------------------


def test_single_edit() -> None:
    out = apply_reply(KERNEL, "Shift by 3:\n" + edit("\tshl.b32 \t%r2, %r1, 2;", "\tshl.b32 \t%r2, %r1, 3;"))
    assert out.ok and out.kind == "edits" and out.applied == 1
    assert out.text == KERNEL.replace("%r1, 2;", "%r1, 3;")


def test_multiple_edits_in_fences_apply_in_order() -> None:
    reply = (
        "```\n" + edit(".target sm_90a", ".target sm_100a") + "```\n"
        "```ptx\n"
        + edit("\tret;\n}", "\tbar.sync 0;\n\tret;\n}")
        + "```\n"
        + edit("\tbar.sync 0;", "\tbar.sync 1;")  # sees the previous block's result
    )
    out = apply_reply(KERNEL, reply)
    assert out.ok and out.applied == 3
    assert ".target sm_100a" in out.text and "\tbar.sync 1;\n\tret;\n}" in out.text


def test_edits_win_over_a_fenced_snippet() -> None:
    reply = edit("\tret;", "\texit;") + "\nWhich gives:\n```ptx\n" + KERNEL + "```\n"
    out = apply_reply(KERNEL, reply)
    assert out.ok and out.kind == "edits" and "\texit;" in out.text


def test_whitespace_tolerant_match() -> None:
    # spaces instead of tabs, and a blank line around the SEARCH lines
    out = apply_reply(
        KERNEL, edit("\n    mov.u32 %r1, %tid.x;\n  shl.b32   %r2, %r1, 2;  \n", "\tmov.u32 \t%r1, %tid.y;")
    )
    assert out.ok
    assert "%tid.y;\n\tadd.s32" in out.text and "shl.b32" not in out.text


def test_whitespace_tolerance_is_not_fuzzy() -> None:
    out = apply_reply(KERNEL, edit("\tshl.b32 \t%r2, %r1, 4;", "\tnop;"))
    assert not out.ok and out.error_kind == "no-match"


def test_no_match_shows_the_nearest_lines_with_numbers() -> None:
    search = "\tld.param.u64 \t%rd1, [k_param_0];\n\tmov.u32 \t%r1, %tid.y;\n\tshl.b32 \t%r2, %r1, 2;"
    out = apply_reply(KERNEL, edit(search, "\tnop;"))
    assert not out.ok and out.error_kind == "no-match" and out.text == KERNEL
    assert "block 1 of 1 matches nothing" in out.error
    assert "ld.param.u64 \t%rd1, [k_param_0];" in out.error.split("\n")[1]  # the SEARCH's first line
    assert "The most similar lines of the kernel are 12-14:" in out.error
    assert "12 | \tld.param.u64 \t%rd1, [k_param_0];" in out.error
    assert "13 | \tmov.u32 \t%r1, %tid.x;" in out.error
    assert "14 | \tshl.b32 \t%r2, %r1, 2;" in out.error


def test_ambiguous_match_says_where() -> None:
    out = apply_reply(KERNEL, edit("\tadd.s32 \t%r3, %r2, 1;", "\tadd.s32 \t%r3, %r2, 2;"))
    assert not out.ok and out.error_kind == "ambiguous"
    assert "matches 2 places, starting at lines 15, 17" in out.error and "exactly one" in out.error


def test_all_or_nothing() -> None:
    reply = edit(".target sm_90a", ".target sm_100a") + edit("\tnot.a.line;", "\tnop;")
    out = apply_reply(KERNEL, reply)
    assert not out.ok and out.text == KERNEL and out.applied == 0
    assert "block 2 of 2" in out.error and "No block was applied" in out.error


def test_every_failing_block_is_reported() -> None:
    reply = edit("\tnot.a.line;", "\tnop;") + edit("\tadd.s32 \t%r3, %r2, 1;", "")
    out = apply_reply(KERNEL, reply)
    assert out.error_kind == "no-match"
    assert "block 1 of 2 matches nothing" in out.error and "block 2 of 2 matches 2 places" in out.error


def test_empty_search_is_refused() -> None:
    out = apply_reply(KERNEL, edit("  ", "\tnop;"))
    assert out.error_kind == "malformed" and "empty SEARCH" in out.error


def test_malformed_and_cut_off_blocks() -> None:
    no_divider = "<<<<<<< SEARCH\n\tret;\n>>>>>>> REPLACE\n"
    assert apply_reply(KERNEL, no_divider).error_kind == "malformed"
    cut = "<<<<<<< SEARCH\n\tret;\n=======\n\texit;\n"
    out = apply_reply(KERNEL, cut)
    assert out.error_kind == "truncated" and out.kind == "edits"
    assert apply_reply(KERNEL, edit("\tret;", "\texit;"), truncated=True).error_kind == "truncated"


def test_deleting_lines() -> None:
    out = apply_reply(KERNEL, edit("\tmov.u32 \t%r1, %tid.x;", ""))
    assert out.ok and "%tid.x" not in out.text


def _big_kernel(n: int) -> str:
    body = "\n".join(f"\tadd.s32 \t%r{i + 1}, %r{i}, {i};" for i in range(n))
    return (
        f".version 8.6\n.target sm_100a\n.address_size 64\n\n.visible .entry big()\n{{\n{body}\n\tret;\n}}\n"
    )


def test_a_5000_line_kernel_is_edited() -> None:
    kernel = _big_kernel(5000)
    blocks = "".join(
        edit(f"\tadd.s32 \t%r{i + 1}, %r{i}, {i};", f"\tsub.s32 \t%r{i + 1}, %r{i}, {i};")
        for i in range(0, 5000, 250)
    )
    out = apply_reply(kernel, blocks)
    assert out.ok and out.applied == 20 and out.text.count("sub.s32") == 20
    # a typo in one line (4101 for 4100): the error points at the real lines, 4107-4108
    typo = "\tadd.s32 \t%r4101, %r4100, 4101;\n\tadd.s32 \t%r4102, %r4101, 4101;"
    miss = apply_reply(kernel, blocks + edit(typo, ""))
    assert miss.error_kind == "no-match" and "4107 | \tadd.s32 \t%r4101, %r4100, 4100;" in miss.error
    # many long blocks that match nowhere still finish
    long_misses = "".join(
        edit("\n".join(f"\tadd.s32 \t%r{i + 1}, %r{i}, {i + 1};" for i in range(j, j + 200)), "")
        for j in range(0, 5000, 500)
    )
    assert apply_reply(kernel, long_misses).error.count("matches nothing") == 10


def test_format_instructions_name_each_form() -> None:
    assert "<<<<<<< SEARCH" not in format_instructions("whole")
    assert "<<<<<<< SEARCH" in format_instructions("search-replace")
    either = format_instructions("either")
    assert "```ptx" in either and "<<<<<<< SEARCH" in either


_PIECES = st.sampled_from(
    [
        "<<<<<<< SEARCH",
        "=======",
        ">>>>>>> REPLACE",
        "```",
        "```ptx",
        "````",
        "{",
        "}",
        ".version 8.0",
        ".entry k()",
        "\tret;",
        "",
        "   ",
        "/*",
        "//",
        '"',
        "\r",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=20)), max_size=30), st.text(max_size=200), st.booleans())
def test_apply_reply_never_raises(pieces: list[str], current: str, truncated: bool) -> None:
    out = apply_reply(current, "\n".join(pieces), truncated=truncated)
    assert out.ok == (out.error_kind is None) == (out.error == "")
    if not out.ok:
        assert out.applied == 0 and out.text == current.replace("\r\n", "\n").replace("\r", "\n")


# --- unified diffs and several kernels ----------------------------------------------------------


def _diff(*hunk_lines: str) -> str:
    return "```diff\n--- a/kernel.ptx\n+++ b/kernel.ptx\n@@ -12,3 +12,3 @@\n" + "\n".join(hunk_lines) + "\n```\n"


def test_a_unified_diff_applies_by_its_lines_not_its_line_numbers() -> None:
    out = apply_reply(KERNEL, "The stride doubles:\n\n" + _diff(
        " \tmov.u32 \t%r1, %tid.x;", "-\tshl.b32 \t%r2, %r1, 2;", "+\tshl.b32 \t%r2, %r1, 3;") + "\nDone.\n")
    assert out.ok and out.kind == "edits" and out.applied == 1
    assert out.text == KERNEL.replace("%r1, 2;", "%r1, 3;")


def test_a_diff_that_does_not_apply_shows_the_nearest_lines_and_applies_nothing() -> None:
    out = apply_reply(KERNEL, _diff(" \tmov.u32 \t%r9, %tid.y;", "-\tshl.b32 \t%r2, %r1, 2;", "+\tshl.b32 \t%r2, %r1, 3;"))
    assert not out.ok and out.error_kind == "no-match" and out.text == KERNEL
    assert "hunk 1 of 1 matches nothing" in out.error and "13 | \tmov.u32 \t%r1, %tid.x;" in out.error
    assert "No hunk was applied" in out.error


def test_a_hunk_of_added_lines_alone_is_told_to_carry_context() -> None:
    out = apply_reply(KERNEL, _diff("+\tbar.sync 0;"))
    assert not out.ok and out.error_kind == "malformed" and "not by its line numbers" in out.error


def test_two_different_whole_kernels_are_refused_not_guessed() -> None:
    new = KERNEL.replace("%r1, 2;", "%r1, 3;")
    out = apply_reply(KERNEL, f"Before:\n```ptx\n{KERNEL}```\nAfter:\n```ptx\n{new}```\n")
    assert not out.ok and out.error_kind == "malformed" and "2 different complete kernels" in out.error
    assert apply_reply(KERNEL, f"```ptx\n{new}```\nAgain:\n```ptx\n{new}```\n").ok  # the same kernel twice is one
