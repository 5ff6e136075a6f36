// JSON text as favor reads it (json_text.hpp): the document equals nlohmann's own parse, and
// the work is linear in the number of values. nlohmann's callback parser, used before, walked
// the whole parent container at the end of every object: a .safetensors header of 40k
// tensors took 69 s, 120k objects would take about 10 minutes (past ctest's 300 s timeout,
// so the large cases below fail there), against well under a second now.
#include <catch2/catch.hpp>

#include <string>

#include "helpers.hpp"
#include "favor/io/json_text.hpp"

using namespace favor;
using favor_test::error_of;
using nlohmann::json;

TEST_CASE("parse_json_text gives nlohmann's document for every kind of value", "[json_text]") {
    const std::string text = R"({"a": [1, -2, 3.5, 1e300, 18446744073709551615, true, false, null, "s\u00e9\n"],
        "b": {"c": [], "d": {}, "e": [[{"f": [{}]}]]}, "": "empty key", "g": -9223372036854775808})";
    const json mine = parse_json_text(text, "t.json");
    CHECK(mine == json::parse(text));
    CHECK(mine.dump() == json::parse(text).dump());
    for (const char* scalar : {"1", "-0", "2.5e-310", "\"x\"", "null", "true", "[]", "{}"})
        CHECK(parse_json_text(scalar, "t.json") == json::parse(scalar));
    CHECK(parse_json_text("/* c */ [1, // two\n 2]", "t.json") == json::array({1, 2}));
    CHECK_THROWS_AS(parse_json_text("/* c */ [1]", "t.json", false), JsonSyntaxError);   // strict: no comments
    CHECK_THROWS_AS(parse_json_text("[1] 2", "t.json"), JsonSyntaxError);                 // one value only
    CHECK_THROWS_AS(parse_json_text("", "t.json"), JsonSyntaxError);
    CHECK(error_of([] { parse_json_text("[1e999]", "t.json"); }).rfind("t.json: invalid JSON: ", 0) == 0);
    // Repeated keys anywhere, named by their place; the same key in sibling objects is fine.
    CHECK(error_of([] { parse_json_text(R"([0, {"a": {"x": 1}}, {"b": [7, {"k": 1, "k": 1}]}])", "t.json"); }) ==
          "t.json: [2].b[1].k: duplicate key (JSON would keep only the last value; remove one)");
    CHECK(error_of([] { parse_json_text(R"({"a": 1, "b": {}, "a": 2})", "t.json"); }) ==
          "t.json: a: duplicate key (JSON would keep only the last value; remove one)");
    CHECK_NOTHROW(parse_json_text(R"({"a": {"k": 1}, "b": {"k": 1}, "c": [{"k": 1}, {"k": 1}]})", "t.json"));
}

TEST_CASE("120k objects in one object or one list parse in linear time", "[json_text]") {
    constexpr std::size_t n = 120000;
    // A .safetensors header's shape: one object of n small objects.
    std::string obj = "{";
    for (std::size_t i = 0; i < n; ++i)
        obj += (i ? ",\"t" : "\"t") + std::to_string(i) + R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
    obj += "}";
    const json o = parse_json_text(obj, "h.json", false);
    REQUIRE(o.size() == n);
    CHECK(o["t119999"]["data_offsets"][1] == 4);
    // A config's: a list of n small objects (variants).
    std::string list = "[";
    for (std::size_t i = 0; i < n; ++i) list += (i ? ",{\"features\":\"trig\",\"n\":" : "{\"features\":\"trig\",\"n\":") + std::to_string(i) + "}";
    list += "]";
    const json l = parse_json_text(list, "c.json");
    REQUIRE(l.size() == n);
    CHECK(l[n - 1]["n"] == n - 1);
    // A repeated key found at the end of the big object is named.
    obj.back() = ',';
    obj += R"("t5":{}})";
    CHECK(error_of([&] { parse_json_text(obj, "h.json", false); }) ==
          "h.json: t5: duplicate key (JSON would keep only the last value; remove one)");
}
