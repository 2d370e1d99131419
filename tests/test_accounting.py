"""The specification card: all five blocks rendered, JSON round trip, 'none' says no protection."""

from sdclab.accounting import Budget, SpecCard, no_protection_card


def test_none_card_renders_five_blocks_and_no_protection():
    text = no_protection_card().render()
    for block in (
        "1. Domain",
        "2. Multiverse",
        "3. Input premetric",
        "4. Output premetric",
        "5. Budget",
    ):
        assert block in text
    assert "no formal guarantee" in text and "no protection" in text
    assert "epsilon" not in text


def test_card_round_trips_through_json_dict():
    card = SpecCard(
        mechanism="example",
        domain="census edited files",
        multiverse="datasets sharing state totals",
        invariants=("state totals",),
        protection_unit="person record",
        neighbours="bounded (change one record)",
        output_premetric="zCDP",
        budget=Budget(rho=2.5),
        covers="all person tables",
        caveats=("example only",),
    )
    assert SpecCard.from_dict(card.to_dict()) == card
    assert "rho = 2.5 (zCDP)" in card.render()
    assert not Budget().is_formal and Budget(epsilon=1.0).is_formal
