"""Stage prompts and output schemas of the annotation chains (Data Store seed 003, §3.1).

Three chains run per excerpt, one goal per call:

* ``entities``: one call, :data:`ENTITIES` → named entities with types;
* ``relations``: :data:`STATEMENTS` (source statements quoted from the excerpt) →
  :data:`RELATIONS` (subject, predicate, object per selected statement) → :data:`QUOTES`
  (supporting quotations, in batches of at most :data:`QUOTE_BATCH` relations);
* ``summary``: one call, :data:`SUMMARY`.

Every request has two messages: the stage's system prompt and a user message holding one JSON
object (:func:`render_input`) with ``section_path`` (the excerpt's section path joined by
``" / "``, a context line only), ``excerpt`` (its canonical text, the only source text) and the
chain's prior outputs. Replies must follow the stage's JSON schema, sent as
``response_format = {"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}``;
the schema is derived from the stage's pydantic model by the ``openai`` package
(``openai.lib.type_to_response_format_param``), and the name is the stage name.

Everything here enters the producer identity (:func:`prompts_fingerprint`): changing a prompt,
a schema or :data:`PRODUCER_VERSION` changes every memo key.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from openai.lib import type_to_response_format_param
from pydantic import BaseModel, ConfigDict

from fabric_resources.identity import derived_id

__all__ = [
    "CHAINS",
    "ENTITIES",
    "NOT_AN_ENTITY",
    "PRODUCER_VERSION",
    "QUOTES",
    "QUOTE_BATCH",
    "RELATIONS",
    "STATEMENTS",
    "SUMMARY",
    "ChainName",
    "EntitiesOutput",
    "QuotesOutput",
    "RelationsOutput",
    "Stage",
    "StatementsOutput",
    "SummaryOutput",
    "prompts_fingerprint",
    "render_input",
]

#: Bump when the chain logic changes in a way the prompts and schemas do not show.
PRODUCER_VERSION = "2"  # 2: names (entities, relation subject and object) grounded exactly, as whole words
# (the bound on a relation's predicate, producer.short_predicate, is applied to memo entries as they are
# read, so it did not need a new version: no home is re-annotated for it)

#: Relations per supporting-quotation request ("bounded candidate batches", seed 003 §3.1).
QUOTE_BATCH = 16

#: An entity type the model may use to say "this is not an entity"; accepting it is malformed
#: output (seed 003 §3.1).
NOT_AN_ENTITY = "NOT_AN_ENTITY"

ChainName = Literal["entities", "relations", "summary"]


class _Output(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EntityItem(_Output):
    name: str
    entity_type: str


class EntitiesOutput(_Output):
    entities: list[EntityItem]


class StatementsOutput(_Output):
    statements: list[str]


class RelationItem(_Output):
    statement_index: int
    subject: str
    predicate: str
    object: str


class RelationsOutput(_Output):
    relations: list[RelationItem]


class QuoteItem(_Output):
    relation_index: int
    quotes: list[str]


class QuotesOutput(_Output):
    supports: list[QuoteItem]


class SummaryOutput(_Output):
    summary: str


@dataclass(frozen=True)
class Stage:
    """One request kind: ``name`` (also the JSON-schema name), its system prompt and the
    pydantic model its reply must validate against."""

    name: str
    system_prompt: str
    output: type[_Output]

    @property
    def response_format(self) -> dict[str, Any]:
        """The strict ``json_schema`` response format for this stage (a fresh copy)."""
        return copy.deepcopy(_response_format(self.output, self.name))


@functools.cache
def _response_format(output: type[_Output], name: str) -> dict[str, Any]:
    param = dict(type_to_response_format_param(output))  # type: ignore[arg-type]
    schema = dict(param["json_schema"])
    schema["name"] = name
    return {"type": "json_schema", "json_schema": schema}


_SOURCE_RULES = (
    "The user message is a JSON object. Its \"excerpt\" is the only source text; "
    "\"section_path\" only says where the excerpt sits in its document and is not source text. "
    "Use no knowledge from outside the excerpt. Reply with JSON that follows the given schema."
)

ENTITIES = Stage(
    "fabric_entities",
    "List the named entities that the excerpt mentions: people, organisations, places, works, "
    "events, products and other proper names or specific named concepts. For each, give its name "
    "exactly as written in the excerpt (copy the characters, do not translate, expand or "
    "normalise) and a short upper-case type such as PERSON, ORGANIZATION, LOCATION, WORK, EVENT, "
    "PRODUCT or CONCEPT. List each name and type once. Return an empty list when there is none. "
    + _SOURCE_RULES,
    EntitiesOutput,
)

STATEMENTS = Stage(
    "fabric_statements",
    "Select the statements of the excerpt that assert a relationship between two named things "
    "(who did what to whom, what belongs to, causes, contains or is part of what). Copy each "
    "statement verbatim from the excerpt: one sentence or clause each, in reading order, without "
    "changing any word. Return an empty list when there is none. " + _SOURCE_RULES,
    StatementsOutput,
)

RELATIONS = Stage(
    "fabric_relations",
    "For each numbered statement in \"statements\", extract the relationships it asserts as "
    "(subject, predicate, object) triples. Subject and object are names as written in the "
    "excerpt; the predicate is a short verb phrase. Give the index of the statement each triple "
    "comes from in statement_index. Return an empty list when a statement asserts none. "
    + _SOURCE_RULES,
    RelationsOutput,
)

QUOTES = Stage(
    "fabric_quotes",
    "For each numbered relationship in \"relations\", give the shortest passages of the excerpt "
    "that support it, copied verbatim (each passage a contiguous piece of the excerpt). Give the "
    "relationship's index in relation_index. Omit a relationship the excerpt does not support. "
    + _SOURCE_RULES,
    QuotesOutput,
)

SUMMARY = Stage(
    "fabric_summary",
    "Summarise the excerpt in at most three sentences, in the language of the excerpt, stating "
    "only what the excerpt says. " + _SOURCE_RULES,
    SummaryOutput,
)

#: The stages of each chain, in call order (the order is part of the producer identity).
CHAINS: Mapping[ChainName, tuple[Stage, ...]] = {
    "entities": (ENTITIES,),
    "relations": (STATEMENTS, RELATIONS, QUOTES),
    "summary": (SUMMARY,),
}


def render_input(section_path: Sequence[str], excerpt: str, **prior: Any) -> str:
    """The user message of a request: one JSON object (UTF-8 characters kept as-is).

    >>> render_input(["Book", "Ch. 1"], "Call me Ishmael.")
    '{"section_path": "Book / Ch. 1", "excerpt": "Call me Ishmael."}'
    """
    return json.dumps({"section_path": " / ".join(section_path), "excerpt": excerpt, **prior},
                      ensure_ascii=False)


def prompts_fingerprint() -> str:
    """32-hex digest of :data:`PRODUCER_VERSION`, the chains in order and, per stage, its name,
    system prompt and canonical response-format JSON, plus :data:`QUOTE_BATCH`."""
    parts: list[object] = [PRODUCER_VERSION, QUOTE_BATCH, NOT_AN_ENTITY]
    for chain, stages in CHAINS.items():
        parts.append(chain)
        for stage in stages:
            parts += [stage.name, stage.system_prompt, json.dumps(stage.response_format, sort_keys=True)]
    return derived_id("annotation-prompts", *parts)
