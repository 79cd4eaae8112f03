"""Profile validation: shipped profiles load, bad files fail with the file and the field named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipeline.profile import Profile, ProfileError, load_profile_file, load_profiles, parse_profile

PROFILES = Path(__file__).resolve().parent.parent / "profiles"

VALID = {
    "id": "acme",
    "brand": "Acme",
    "sector": "hardware",
    "persona": "You are Al, the phone assistant of Acme.",
    "greeting": "Hi, this is Al from Acme.",
    "facts": ["Shops open at 9 am."],
    "policies": ["Never share a password."],
    "llm": {"temperature": 0.2, "max_tokens": 50, "history_turns": 4},
    "turn": {"endpoint_silence_ms": 600},
    "escalation": {"target": "+18005550100", "description": "an Acme expert"},
}


def write(folder: Path, name: str, data) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def with_(**changes) -> dict:
    data = {**VALID}
    for key, value in changes.items():
        if "__" in key:
            section, field = key.split("__")
            data[section] = {**data.get(section, {}), field: value}
        else:
            data[key] = value
    return data


def without(*keys: str) -> dict:
    return {k: v for k, v in VALID.items() if k not in keys}


def load_error(tmp_path: Path, data, name: str = "bad.yaml") -> tuple[Path, str]:
    path = write(tmp_path, name, data)
    with pytest.raises(ProfileError) as info:
        load_profiles(tmp_path)
    return path, str(info.value)


# --- shipped profiles ---------------------------------------------------------------


def test_every_shipped_profile_loads():
    files = sorted([*PROFILES.glob("*.yaml"), *PROFILES.glob("*.yml")])
    profiles = load_profiles(PROFILES)
    assert len(profiles) >= 3
    assert len(profiles) == len(files)
    assert len({p.sector for p in profiles.values()}) == len(profiles)
    assert all(p.sector for p in profiles.values())
    for key, profile in profiles.items():
        assert key == profile.id
        assert profile.brand and profile.persona and profile.greeting
        assert profile.facts, profile.id
        assert profile.escalation is not None and profile.escalation.target


@pytest.mark.parametrize("path", sorted(PROFILES.glob("*.y*ml")), ids=lambda p: p.name)
def test_each_shipped_file_is_valid_and_named_after_its_id(path):
    profile = load_profile_file(path)
    assert profile.id == path.stem


# --- valid custom profiles ------------------------------------------------------------


def test_valid_profile_loads_with_defaults(tmp_path):
    write(tmp_path, "acme.yaml", without("voice", "sector"))
    profiles = load_profiles(tmp_path)
    acme = profiles["acme"]
    assert isinstance(acme, Profile)
    assert acme.llm.temperature == 0.2 and acme.llm.history_turns == 4
    assert acme.turn.endpoint_silence_ms == 600 and acme.turn.barge_in_min_ms == 300  # default kept
    assert acme.voice.length_scale == 1.0
    assert acme.sector == ""


def test_minimal_profile(tmp_path):
    data = {k: VALID[k] for k in ("id", "brand", "persona", "greeting")}
    write(tmp_path, "a.yaml", data)
    profile = load_profiles(tmp_path)["acme"]
    assert profile.facts == [] and profile.policies == [] and profile.escalation is None


def test_yml_extension_is_loaded_and_other_files_ignored(tmp_path):
    write(tmp_path, "acme.yml", VALID)
    write(tmp_path, "notes.txt", "not: a profile: at all: [")
    write(tmp_path, "other.json", "{}")
    assert list(load_profiles(tmp_path)) == ["acme"]


def test_several_profiles_keyed_by_id(tmp_path):
    write(tmp_path, "one.yaml", with_(id="one"))
    write(tmp_path, "two.yaml", with_(id="two-2_b"))
    assert sorted(load_profiles(tmp_path)) == ["one", "two-2_b"]


# --- errors name the file and the field -------------------------------------------------


@pytest.mark.parametrize("field", ["id", "brand", "persona", "greeting"])
def test_missing_required_field(tmp_path, field):
    path, message = load_error(tmp_path, without(field))
    assert str(path) in message
    assert f"'{field}'" in message


def test_missing_escalation_target(tmp_path):
    path, message = load_error(tmp_path, with_(escalation={"description": "someone"}))
    assert str(path) in message and "'escalation.target'" in message


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"llm__temperature": 5}, "llm.temperature"),
        ({"llm__temperature": -0.1}, "llm.temperature"),
        ({"llm__temperature": "hot"}, "llm.temperature"),
        ({"llm__max_tokens": 0}, "llm.max_tokens"),
        ({"llm__history_turns": 0}, "llm.history_turns"),
        ({"turn__endpoint_silence_ms": 10}, "turn.endpoint_silence_ms"),
        ({"turn__endpoint_silence_ms": "soon"}, "turn.endpoint_silence_ms"),
        ({"turn__vad_threshold": 1.0}, "turn.vad_threshold"),
        ({"turn__barge_in_min_ms": 10}, "turn.barge_in_min_ms"),
        ({"voice__length_scale": 3.0}, "voice.length_scale"),
        ({"voice__volume": 0}, "voice.volume"),
        ({"facts": "just one string"}, "facts"),
        ({"facts": ["ok", {"nested": 1}]}, "facts.1"),
        ({"llm": 5}, "llm"),
        ({"greeting": ""}, "greeting"),
        ({"escalation": {"target": ""}}, "escalation.target"),
    ],
)
def test_wrong_type_or_out_of_range_names_dotted_field(tmp_path, changes, field):
    path, message = load_error(tmp_path, with_(**changes))
    assert str(path) in message
    assert f"'{field}'" in message


def test_a_voice_the_server_does_not_bundle_is_refused_naming_the_ones_it_does(tmp_path):
    path, message = load_error(tmp_path, with_(voice__voice="en_GB-alba-medium"))
    assert str(path) in message and "'voice.voice'" in message and "en_US-joe-medium" in message
    assert parse_profile(with_(voice__voice="en_US-joe-medium"), "ok").voice.voice == "en_US-joe-medium"


def test_all_errors_of_a_file_are_reported(tmp_path):
    _, message = load_error(tmp_path, with_(llm__temperature=5, turn__endpoint_silence_ms=10))
    assert "'llm.temperature'" in message and "'turn.endpoint_silence_ms'" in message


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"colour": "blue"}, "colour"),
        ({"llm__top_k": 5}, "llm.top_k"),
        ({"turn__endpoint_ms": 500}, "turn.endpoint_ms"),
        ({"voice__speed": 1.2}, "voice.speed"),
    ],
)
def test_unknown_extra_field_rejected(tmp_path, changes, field):
    path, message = load_error(tmp_path, with_(**changes))
    assert str(path) in message and f"'{field}'" in message


@pytest.mark.parametrize("bad_id", ["../etc", "Acme", "a b", "", "-acme", "a/b", "a" * 65, "acme.yaml", "acme\n"])
def test_invalid_id_rejected(tmp_path, bad_id):
    path, message = load_error(tmp_path, with_(id=bad_id))
    assert str(path) in message and "'id'" in message


def test_id_must_be_a_string(tmp_path):
    path, message = load_error(tmp_path, with_(id=123))
    assert str(path) in message and "'id'" in message


def test_duplicate_ids_rejected(tmp_path):
    write(tmp_path, "a.yaml", VALID)
    second = write(tmp_path, "b.yaml", VALID)
    with pytest.raises(ProfileError) as info:
        load_profiles(tmp_path)
    message = str(info.value)
    assert str(second) in message and "'id'" in message and "acme" in message


def test_duplicate_ids_across_yaml_and_yml_rejected(tmp_path):
    write(tmp_path, "a.yaml", VALID)
    write(tmp_path, "a.yml", VALID)
    with pytest.raises(ProfileError, match="already used"):
        load_profiles(tmp_path)


def test_invalid_yaml_rejected_naming_the_file(tmp_path):
    path, message = load_error(tmp_path, "id: acme\nbrand: [unclosed\n  persona: : :\n")
    assert str(path) in message
    assert "YAML" in message


@pytest.mark.parametrize("content", ["", "- a\n- b\n", "just a string\n", "42\n"])
def test_non_mapping_yaml_rejected_naming_the_file(tmp_path, content):
    path, message = load_error(tmp_path, content)
    assert str(path) in message


def test_one_bad_file_fails_the_whole_folder(tmp_path):
    write(tmp_path, "a.yaml", VALID)
    path, message = load_error(tmp_path, with_(id="zed", llm__temperature=9), name="z.yaml")
    assert str(path) in message and "'llm.temperature'" in message


def test_empty_folder_rejected(tmp_path):
    with pytest.raises(ProfileError) as info:
        load_profiles(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_folder_with_no_yaml_rejected(tmp_path):
    write(tmp_path, "readme.txt", "hello")
    with pytest.raises(ProfileError):
        load_profiles(tmp_path)


def test_missing_folder_rejected(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(ProfileError) as info:
        load_profiles(missing)
    assert str(missing) in str(info.value)


def test_profile_error_is_a_value_error():
    assert issubclass(ProfileError, ValueError)


def test_parse_profile_names_its_source():
    with pytest.raises(ProfileError) as info:
        parse_profile(without("greeting"), "custom-source")
    assert "custom-source" in str(info.value) and "'greeting'" in str(info.value)
    assert parse_profile(VALID).id == "acme"


def test_dtmf_intents_unquoted_digit_keys_and_invalid_keys(tmp_path):
    path = write(tmp_path, "acme.yaml", yaml.safe_dump(with_(dtmf={1: "Check my order.", "#": "Repeat that."})))
    assert load_profile_file(path).dtmf == {"1": "Check my order.", "#": "Repeat that."}
    for bad, field in [({"A": "x"}, "dtmf.A.[key]"), ({"12": "x"}, "dtmf.12.[key]"), ({"1": ""}, "dtmf.1")]:
        _, message = load_error(tmp_path, with_(dtmf=bad))
        assert f"field '{field}'" in message, message
