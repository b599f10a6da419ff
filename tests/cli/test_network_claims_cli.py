"""`clusterplan network scaling --claim`: a vendor's or a paper's scaling figure judged from the command line,
reproduced, explained or unreproducible (app.core.claims), and a malformed claim refused in one line."""

from __future__ import annotations

import pytest

from app.cli.commands.network import parse_claim
from tests.cli_support import run_main
from tests.paths import ROOT

SCENARIO = str(ROOT / "examples" / "llama3-70b-64xh100.json")
ARGS = [
    "network",
    "scaling",
    SCENARIO,
    "--gpus",
    "64,128",
    "--fabrics",
    "ib-ndr-8x400,roce-ecmp-scattered-8x400",
]


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        ("roce-8x400@128=71%", {"fabric": "roce-8x400", "gpus": 128, "efficiency": 0.71}),
        ("roce-8x400@128=0.71", {"fabric": "roce-8x400", "gpus": 128, "efficiency": 0.71}),
        (
            " roce-8x400@128=0.42/ib-ndr-8x400 ",
            {"fabric": "roce-8x400", "gpus": 128, "efficiency": 0.42, "relative_to": "ib-ndr-8x400"},
        ),
    ],
)
def test_claims_are_read_as_the_endpoint_takes_them(text: str, claim: dict[str, object]) -> None:
    assert parse_claim(text) == pytest.approx(claim)


def test_each_claim_gets_a_verdict_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(
        [
            *ARGS,
            "--claim",
            "ib-ndr-8x400@128=99%",
            "--claim",
            "roce-ecmp-scattered-8x400@128=0.3/ib-ndr-8x400",
        ],
        capsys,
    )
    assert code == 0, err
    verdicts = [line for line in out.splitlines() if line.startswith("claim ")]
    assert len(verdicts) == 2
    assert verdicts[0].startswith("claim 99% at 128 GPUs on ib-ndr-8x400: REPRODUCED")
    assert "of ib-ndr-8x400's throughput" in verdicts[1] and "UNREPRODUCIBLE" in verdicts[1]


@pytest.mark.parametrize(
    ("claim", "words"),
    [
        ("roce@x=1", "bad --claim 'roce@x=1'"),
        ("ib-ndr-8x400@128=1.2.3", "not a number"),
        ("ethernet-tcp-100@128=0.5", "claims.0.fabric"),
        ("ib-ndr-8x400@96=0.9", "claims.0.gpus"),
    ],
)
def test_a_bad_claim_is_one_message_and_exit_2(
    capsys: pytest.CaptureFixture[str], claim: str, words: str
) -> None:
    code, out, err = run_main([*ARGS, "--claim", claim], capsys)
    assert code == 2 and words in err and "Traceback" not in err and out == ""
