// Strict JSON parser (acceptance/refusal table) and canonical encoder checked against Python's json.dumps
// output.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <samebits/json.hpp>
#include <string>
#include <vector>

using samebits::json::canonical_json;
using samebits::json::float_repr;
using samebits::json::from_ascii;
using samebits::json::integer_bit_length;
using samebits::json::kMaxIntegerDigits;
using samebits::json::kMaxNestingDepth;
using samebits::json::parse;
using samebits::json::ParseError;
using samebits::json::Type;
using samebits::json::Value;

namespace {

std::string nested_arrays(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string nested_objects(std::size_t depth) {
  std::string text;
  for (std::size_t i = 0; i < depth; ++i) text += "{\"k\":";
  text += "0";
  text += std::string(depth, '}');
  return text;
}

bool parses(const std::string& text) {
  try {
    parse(text);
    return true;
  } catch (const ParseError&) {
    return false;
  }
}

std::string canonical_of(const std::string& text) { return canonical_json(parse(text)); }

// Decimal string arithmetic for the bit-length test: 2^k and 2^k - 1 without a big-integer library.
std::string power_of_two_decimal(int exponent) {
  std::string digits = "1";  // little-endian decimal digits
  for (int i = 0; i < exponent; ++i) {
    int carry = 0;
    for (char& d : digits) {
      int value = (d - '0') * 2 + carry;
      d = static_cast<char>('0' + value % 10);
      carry = value / 10;
    }
    if (carry) digits.push_back(static_cast<char>('0' + carry));
  }
  return std::string(digits.rbegin(), digits.rend());
}

std::string minus_one(std::string decimal) {
  for (std::size_t i = decimal.size(); i-- > 0;) {
    if (decimal[i] != '0') {
      --decimal[i];
      break;
    }
    decimal[i] = '9';
  }
  std::size_t first = decimal.find_first_not_of('0');
  return first == std::string::npos ? "0" : decimal.substr(first);
}

}  // namespace

// ------------------------------------------------------------------------------------ acceptance table

TEST(JsonParse, AcceptsValidDocuments) {
  const char* accepted[] = {"{}",
                            "[]",
                            " \t\n\r{\"a\":1} \r\n\t ",
                            "\"x\"",
                            "0",
                            "-0",
                            "1.5e3",
                            "1E+2",
                            "-0.0",
                            "2e-2",
                            "true",
                            "false",
                            "null",
                            "[1,[2,[3]]]",
                            "{\"a\":{\"b\":[null,true,false]}}",
                            "\"\\u00e9\"",
                            "\"\xc3\xa9\"",
                            "\"\xf0\x9f\x98\x80\"",
                            "\"\xef\xbf\xbf\"",
                            "\"\\ud83d\\ude00\"",
                            "\"\\ud83d\"",
                            "\"\\udc00\\ud800\"",
                            "\"\\/\\\\\\\"\\b\\f\\n\\r\\t\"",
                            "\"\x7f\"",
                            "[1e-400]",
                            "123456789012345678901234567890",
                            "{\"a\":1,\"A\":2,\"\\u00e9\":3}"};
  for (const char* text : accepted) EXPECT_TRUE(parses(text)) << text;
}

TEST(JsonParse, RefusesInvalidDocuments) {
  const std::string refused[] = {
      "",
      "   ",
      "\xEF\xBB\xBF{}",             // byte order mark
      "{\"a\":1,\"a\":2}",          // duplicate key
      "{\"a\":1,\"\\u0061\":2}",    // duplicate after unescaping
      "{\"x\":{\"k\":1,\"k\":1}}",  // duplicate in a nested object
      "[1,]",
      "{\"a\":1,}",
      "[01]",
      "[1.]",
      "[.5]",
      "[+1]",
      "[1e]",
      "[1e+]",
      "[-]",
      "[--1]",
      "[0x10]",
      "NaN",
      "[NaN]",
      "Infinity",
      "-Infinity",
      "[1e400]",
      "[-1e400]",
      "[1.7976931348623159e308]",
      std::string("\"a\x01\""),
      "\"a\tb\"",
      "\"a\nb\"",
      std::string("\"\0\"", 3),  // raw control characters
      "\"abc",
      "\"\\x\"",
      "\"\\u12\"",
      "\"\\uZZZZ\"",
      "\"\\ud83d\\uZZZZ\"",
      "\"\\",
      "\"\xff\"",
      "\"\xc0\xaf\"",
      "\"\xc1\xbf\"",
      "\"\xe0\x80\xaf\"",
      "\"\xed\xa0\x80\"",
      "\"\xed\xbf\xbf\"",
      "\"\xf0\x80\x80\x80\"",
      "\"\xf4\x90\x80\x80\"",
      "\"\xf5\x80\x80\x80\"",
      "\"\xe2\x82\"",
      "\"\x80\"",
      "\"\xe2\x82",
      "\xc3\xa9",
      "{1:2}",
      "{\"a\" 1}",
      "{\"a\":}",
      "[1 2]",
      "{} {}",
      "{}x",
      "[] 0",
      "tru",
      "nul",
      "falsey",
      "'a'",
      "[1] // comment",
      "/* c */ []",
      "{\"a\":1",
      "[",
  };
  for (const std::string& text : refused) EXPECT_FALSE(parses(text)) << text;
}

TEST(JsonParse, NestingBound) {
  EXPECT_EQ(kMaxNestingDepth, 512u);
  EXPECT_TRUE(parses(nested_arrays(kMaxNestingDepth)));
  EXPECT_FALSE(parses(nested_arrays(kMaxNestingDepth + 1)));
  EXPECT_TRUE(parses(nested_objects(kMaxNestingDepth)));
  EXPECT_FALSE(parses(nested_objects(kMaxNestingDepth + 1)));
  EXPECT_FALSE(parses(nested_arrays(100000)));  // no stack exhaustion: refused at depth 513
}

TEST(JsonParse, IntegerDigitBound) {
  std::string longest(kMaxIntegerDigits, '7');
  EXPECT_TRUE(parses(longest));
  EXPECT_TRUE(parses("-" + longest));
  EXPECT_FALSE(parses(longest + "7"));
  EXPECT_FALSE(parses("-" + longest + "7"));
  // The digit bound is for integers only; a long float literal is fine (Python's float() has no limit).
  EXPECT_TRUE(parses("0." + std::string(6000, '1')));
}

TEST(JsonParse, ErrorsCarryAnOffsetAndValueKind) {
  try {
    parse("[1, 2, x]");
    FAIL() << "expected a ParseError";
  } catch (const ParseError& error) {
    EXPECT_EQ(error.byte_offset(), 7u);
    EXPECT_EQ(error.kind(), samebits::ErrorKind::Value);
  }
}

// --------------------------------------------------------------------------------------- value model

TEST(JsonValue, IntegersKeptExactlyAndNormalized) {
  EXPECT_EQ(parse("-0").integer_decimal(), "0");
  EXPECT_EQ(parse("123456789012345678901234567890").integer_decimal(), "123456789012345678901234567890");
  EXPECT_EQ(parse("-123456789012345678901234567890").integer_decimal(), "-123456789012345678901234567890");
  EXPECT_EQ(parse("9223372036854775807").as_int64(), INT64_MAX);
  EXPECT_EQ(parse("-9223372036854775808").as_int64(), INT64_MIN);
  EXPECT_FALSE(parse("9223372036854775808").as_int64().has_value());
  EXPECT_FALSE(parse("1.0").as_int64().has_value());
  EXPECT_EQ(Value::make_integer("-000").integer_decimal(), "0");
  EXPECT_EQ(Value::make_integer("0042").integer_decimal(), "42");
}

TEST(JsonValue, FloatsDistinguishedFromIntegers) {
  EXPECT_EQ(parse("1").type(), Type::Integer);
  EXPECT_EQ(parse("1.0").type(), Type::Float);
  EXPECT_EQ(parse("1e0").type(), Type::Float);
  EXPECT_EQ(parse("1E0").type(), Type::Float);
  EXPECT_EQ(parse("-0").type(), Type::Integer);
  EXPECT_EQ(parse("true").type(), Type::Bool);
}

TEST(JsonValue, FloatsCorrectlyRounded) {
  EXPECT_EQ(parse("0.1").as_float(), 0.1);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(parse("-0.0").as_float()), 0x8000000000000000ull);
  EXPECT_EQ(parse("5e-324").as_float(), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(parse("2.4703282292062328e-324").as_float(), std::numeric_limits<double>::denorm_min());
  // Total underflow rounds to a signed zero, as Python's float() does.
  EXPECT_EQ(std::bit_cast<std::uint64_t>(parse("2.4703282292062327e-324").as_float()), 0ull);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(parse("1e-400").as_float()), 0ull);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(parse("-1e-400").as_float()), 0x8000000000000000ull);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(parse("0.0000001e-999999999999999999999").as_float()), 0ull);
  EXPECT_EQ(parse("1.7976931348623158e308").as_float(), std::numeric_limits<double>::max());
  EXPECT_FALSE(parses("1000000000000000000000e999999999999999999999"));
  EXPECT_FALSE(parses("0.00000000000000001e326"));  // 1e309 written with leading zeros
}

TEST(JsonValue, StringsDecodedToCodePoints) {
  EXPECT_EQ(parse("\"\\ud83d\\ude00\"").as_string(), std::u32string(1, U'\U0001F600'));
  EXPECT_EQ(parse("\"\xf0\x9f\x98\x80\"").as_string(), std::u32string(1, U'\U0001F600'));
  EXPECT_EQ(parse("\"\\ud83d\"").as_string(), std::u32string(1, char32_t{0xD83D}));
  EXPECT_EQ(parse("\"\\ud83d\\u0041\"").as_string(), (std::u32string{char32_t{0xD83D}, U'A'}));
  EXPECT_EQ(parse("\"\\ude00\\ud83d\"").as_string(), (std::u32string{char32_t{0xDE00}, char32_t{0xD83D}}));
  EXPECT_EQ(parse("\"\\ud83d\\ud83d\\ude00\"").as_string(),
            (std::u32string{char32_t{0xD83D}, U'\U0001F600'}));
  EXPECT_EQ(parse("\"\\u00E9\xc3\xa9\"").as_string(), (std::u32string{U'\u00e9', U'\u00e9'}));
  EXPECT_TRUE(parse("\"AdamW\"").is_string_equal("AdamW"));
  EXPECT_FALSE(parse("\"AdamW\"").is_string_equal("adamw"));
  EXPECT_FALSE(parse("1").is_string_equal("1"));
}

TEST(JsonValue, ObjectsKeepDocumentOrder) {
  Value object = parse("{\"z\":1,\"a\":2,\"m\":[3]}");
  ASSERT_TRUE(object.is_object());
  const auto& members = object.as_object();
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].first, U"z");
  EXPECT_EQ(members[1].first, U"a");
  EXPECT_EQ(members[2].first, U"m");
  EXPECT_EQ(object.find("a")->integer_decimal(), "2");
  EXPECT_EQ(object.find("missing"), nullptr);
  EXPECT_TRUE(object.has_exactly_keys({"a", "m", "z"}));
  EXPECT_FALSE(object.has_exactly_keys({"a", "m"}));
  EXPECT_FALSE(object.has_exactly_keys({"a", "m", "z", "q"}));
  EXPECT_FALSE(object.has_exactly_keys({"a", "m", "y"}));
  EXPECT_FALSE(parse("[]").has_exactly_keys({}));
  EXPECT_TRUE(parse("{}").has_exactly_keys({}));
}

TEST(JsonValue, MakeObjectRefusesDuplicates) {
  Value::Object members;
  members.emplace_back(U"k", Value::make_integer(1));
  members.emplace_back(U"k", Value::make_integer(2));
  EXPECT_THROW(Value::make_object(std::move(members)), ParseError);
}

// ---------------------------------------------------------------------------------- canonical output

// Every expected string below was produced once with Python 3.11:
//   json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
TEST(JsonCanonical, FloatsMatchPythonRepr) {
  const std::pair<double, const char*> cases[] = {
      {1e-05, "1e-05"},
      {1e-08, "1e-08"},
      {0.0010000000474974513, "0.0010000000474974513"},
      {1e16, "1e+16"},
      {-0.0, "-0.0"},
      {0.0, "0.0"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {1.0, "1.0"},
      {0.001, "0.001"},
      {0.0005000000237487257, "0.0005000000237487257"},
      {9.999999747378752e-06, "9.999999747378752e-06"},
      {0.0001, "0.0001"},
      {9.999999999999999e-05, "9.999999999999999e-05"},
      {9999999999999998.0, "9999999999999998.0"},
      {1e15, "1000000000000000.0"},
      {123456789.0, "123456789.0"},
      {0.1, "0.1"},
      {-2.5, "-2.5"},
      {1e22, "1e+22"},
      {1.5e-300, "1.5e-300"},
      {2.2250738585072014e-308, "2.2250738585072014e-308"},
      {100.0, "100.0"},
      {0.8999999761581421, "0.8999999761581421"},
      {9.99999993922529e-09, "9.99999993922529e-09"},
      {3.4028234663852886e+38, "3.4028234663852886e+38"},
      {1e+100, "1e+100"},
      {12345678901234567.0, "1.2345678901234568e+16"},
  };
  for (const auto& [number, expected] : cases) {
    EXPECT_EQ(float_repr(number), expected);
    EXPECT_EQ(canonical_json(Value::make_float(number)), expected);
  }
}

// Random bit patterns (Python: random.seed(12345); getrandbits(64) reinterpreted as a double, then
// 10**uniform(-6, 18) and float32-rounded values), each with Python's json.dumps of that double.
TEST(JsonCanonical, RandomFloatsMatchPython) {
  const std::pair<std::uint64_t, const char*> cases[] = {
      {0xbb91433a6aa79987ull, "-9.1387497028769e-22"},
      {0xd1f6f86c029a7245ull, "-7.139820454309632e+86"},
      {0xcd8778e7d340bbcdull, "-3.089900467300506e+65"},
      {0xdaea58ba4c73a942ull, "-9.131299887434701e+129"},
      {0xee8971105e503a67ull, "-2.942877356480083e+224"},
      {0x452ec40a3193ca54ull, "1.8596773229471727e+25"},
      {0x6facaa5090e5e945ull, "8.692067227002291e+229"},
      {0x5f811cb929645f8bull, "1.1202983176732331e+152"},
      {0xdfc9e3b11fcff454ull, "-2.71187804877673e+153"},
      {0x42d6cb5c6ed4e94bull, "100250739757989.17"},
      {0xa091250e8fe46024ull, "-8.183770430730414e-152"},
      {0x9c9cea0c2ca1c789ull, "-7.481942688750341e-171"},
      {0x2fd2b7a48d9fe5b9ull, "2.525722336173709e-78"},
      {0xbcf74d7a5adad121ull, "-5.1742273216317384e-15"},
      {0xbb9d58e4f543bbcfull, "-1.5536301412264183e-21"},
      {0x87f26aee175f0cd2ull, "-2.1789094907487126e-270"},
      {0xbc428d42fa882692ull, "-2.011390540120253e-18"},
      {0x95c5fb986980a81full, "-8.764271883973625e-204"},
      {0x2aa4857e8101e89aull, "2.863253393402251e-103"},
      {0x34a9af4125ece845ull, "5.2374923668024025e-55"},
      {0x13ed748bb80e3b0dull, "1.0936941514836716e-212"},
      {0xd64a3ce030a1f6d5ull, "-4.8141078806962144e+107"},
      {0x527122dc57708107ull, "1.3635548534927665e+89"},
      {0x7576714a06057c82ull, "6.739508595758605e+257"},
      {0x06e0f45856eaa301ull, "1.5303059611217572e-275"},
      {0x82bde024f7acee22ull, "-1.8272601399104736e-295"},
      {0xb0d26ee6fa928906ull, "-1.6301294128168097e-73"},
      {0x6a5ccc2cbe99854aull, "2.2572140005785964e+204"},
      {0x01b5577d00e266d0ull, "1.9917479904700448e-300"},
      {0xa9f559fcf0b37868ull, "-1.4546223495953267e-106"},
      {0x29ef41d0deea959eull, "1.0647315861075762e-106"},
      {0x94820a06c555663full, "-6.85882119867777e-210"},
      {0x495cfa4f2dcaabd5ull, "2.5849035208654928e+45"},
      {0xa70ce1b51978cec0ull, "-1.3980865026926386e-120"},
      {0x1b1bcf726a1eccdaull, "4.2893241473530543e-178"},
      {0xae711399e2b2848bull, "-5.493913207906451e-85"},
      {0x2e80dbd593fd7234ull, "1.084765896058589e-84"},
      {0x600027e8bc90a6ecull, "2.7076892184663095e+154"},
      {0xf5cdb9413b8d0e76ull, "-2.8563304288860733e+259"},
      {0x9893588c860a7da1ull, "-2.713760756235414e-190"},
      {0xc238ada2d4a13b99ull, "-105992344737.2328"},
      {0x42b55e86289082dcull, "23495721914498.86"},
      {0xbf4896430909486full, "-0.0007503344841757307"},
      {0x3fc3f7e01c115bb1ull, "0.15600205774782475"},
      {0xbff8880fcb41fb6bull, "-1.5332181873088426"},
      {0x4144e77f44216aa1ull, "2739966.5322697912"},
      {0x3ee4d307e8286434ull, "9.929818820574467e-06"},
      {0x40310df76939e8dfull, "17.05455644286928"},
      {0x3f708dc9673876ffull, "0.0040414683640201945"},
      {0xc06eedd31a922908ull, "-247.43201950594835"},
      {0xbf77fb98beacf318ull, "-0.005855175647238274"},
      {0x3ec10e9486d7b3b4ull, "2.0333473489315125e-06"},
      {0x423c02439fc9fb3eull, "120297070537.98141"},
      {0x40a01d28ad18c4e5ull, "2062.579445623431"},
      {0xc29f197762745f49ull, "-8548559396119.821"},
      {0x3fc2dd1e2e5c95c6ull, "0.14737298263314197"},
      {0x411518b37e6c7f35ull, "345644.87346075784"},
      {0xbec20075b0c9be6cull, "-2.1459812898290086e-06"},
      {0xc0507387ccfabb49ull, "-65.80516361699587"},
      {0x4348a9808bad93bfull, "1.3883538010744702e+16"},
      {0x408149ae89abd79bull, "553.2102235245869"},
      {0x4175b8fd1ea7583full, "22777809.915855642"},
      {0xc127037669bfecb0ull, "-754107.2065423932"},
      {0x3fd5f5599e2d4c37ull, "0.34309997984854895"},
      {0xc000300fa0000000ull, "-2.0234673023223877"},
      {0xc000cb0620000000ull, "-2.099132776260376"},
      {0xc003a6c260000000ull, "-2.456425428390503"},
      {0x3ff2ca05a0000000ull, "1.1743217706680298"},
      {0xc000f74c20000000ull, "-2.120750665664673"},
      {0x3fee467fe0000000ull, "0.9461058974266052"},
      {0x4002866b60000000ull, "2.3156344890594482"},
      {0x400017b6c0000000ull, "2.0115790367126465"},
  };
  for (const auto& [bits, expected] : cases) {
    double number = std::bit_cast<double>(bits);
    EXPECT_EQ(float_repr(number), expected) << std::hex << bits;
    // And the text parses back to the same double.
    EXPECT_EQ(std::bit_cast<std::uint64_t>(parse(expected).as_float()), bits) << expected;
  }
}

TEST(JsonCanonical, NonFiniteFloatsRefused) {
  EXPECT_THROW(canonical_json(Value::make_float(std::numeric_limits<double>::infinity())), samebits::Error);
  EXPECT_THROW(canonical_json(Value::make_float(-std::numeric_limits<double>::infinity())), samebits::Error);
  EXPECT_THROW(canonical_json(Value::make_float(std::numeric_limits<double>::quiet_NaN())), samebits::Error);
}

TEST(JsonCanonical, IntegersAndLiterals) {
  EXPECT_EQ(canonical_of("123456789012345678901234567890"), "123456789012345678901234567890");
  EXPECT_EQ(canonical_of("-123456789012345678901234567890"), "-123456789012345678901234567890");
  EXPECT_EQ(canonical_of("18446744073709551615"), "18446744073709551615");
  EXPECT_EQ(canonical_of("-0"), "0");
  EXPECT_EQ(canonical_of(" [ null , true , false , [ ] , { } , {\"a\" : [1, {\"b\": null}]} ] "),
            "[null,true,false,[],{},{\"a\":[1,{\"b\":null}]}]");
  // Floats are re-laid-out the way Python reprs them, whatever the source spelling.
  EXPECT_EQ(canonical_of("[1E5, 1.50, 0.0000100, 1e16, -0.0, 10e-1]"), "[100000.0,1.5,1e-05,1e+16,-0.0,1.0]");
}

TEST(JsonCanonical, KeysSortedByCodePoint) {
  // Python: {"\u00e9":1,"z":2,"a":3,"\U0001F600":4,"\uffff":5,"A":6,"":7}. U+FFFF sorts before U+1F600
  // by code point, although UTF-16 order would put the surrogate pair first.
  EXPECT_EQ(canonical_of("{\"\\u00e9\":1,\"z\":2,\"a\":3,\"\\ud83d\\ude00\":4,\"\\uffff\":5,\"A\":6,\"\":7}"),
            "{\"\":7,\"A\":6,\"a\":3,\"z\":2,\"\\u00e9\":1,\"\\uffff\":5,\"\\ud83d\\ude00\":4}");
  EXPECT_EQ(canonical_of("{\"schema\":3,\"payload_sha256\":1,\"arithmetic_profile\":4,\"payload\":2}"),
            "{\"arithmetic_profile\":4,\"payload\":2,\"payload_sha256\":1,\"schema\":3}");
  EXPECT_EQ(canonical_of("{\"norm_eps\":3,\"n_kv_heads\":1,\"n_heads\":2}"),
            "{\"n_heads\":2,\"n_kv_heads\":1,\"norm_eps\":3}");
}

TEST(JsonCanonical, StringEscapesMatchPython) {
  // Python: ["\n\r\t\b\f\x00\x1f\x7f\"\\/", "\u20ac\U0001F600\ud800"]
  EXPECT_EQ(canonical_of(
                "[\"\\n\\r\\t\\b\\f\\u0000\\u001f\x7f\\\"\\\\\\/\",\"\xe2\x82\xac\xf0\x9f\x98\x80\\ud800\"]"),
            "[\"\\n\\r\\t\\b\\f\\u0000\\u001f\\u007f\\\"\\\\/\",\"\\u20ac\\ud83d\\ude00\\ud800\"]");
  // Lone surrogates of either kind survive a round trip, in their order.
  EXPECT_EQ(canonical_of("\"\\udc00\\ud800\""), "\"\\udc00\\ud800\"");
  EXPECT_EQ(canonical_of("\"\\uABCD\""), "\"\\uabcd\"");
}

TEST(JsonCanonical, CanonicalTextIsAFixedPoint) {
  const char* documents[] = {
      "{\"payload\":{\"architecture\":[8,16,3],\"config\":{\"beta1\":0.8999999761581421,\"lr\":0."
      "0010000000474974513}},"
      "\"schema\":\"x\"}",
      "[\"\\u00e9\\ud83d\\ude00\",-0.0,5e-324,1e+16,123456789012345678901234567890]",
  };
  for (const char* text : documents) EXPECT_EQ(canonical_of(text), text);
}

// --------------------------------------------------------------------------------------------- misc

TEST(JsonUtilities, IntegerBitLength) {
  EXPECT_EQ(integer_bit_length("0"), 0u);
  EXPECT_EQ(integer_bit_length("1"), 1u);
  EXPECT_EQ(integer_bit_length("-1"), 1u);
  EXPECT_EQ(integer_bit_length("255"), 8u);
  EXPECT_EQ(integer_bit_length("256"), 9u);
  EXPECT_EQ(integer_bit_length("18446744073709551615"), 64u);
  EXPECT_EQ(integer_bit_length("18446744073709551616"), 65u);
  for (int k : {1, 9, 31, 32, 33, 63, 64, 100, 4095, 4096, 4097}) {
    std::string power = power_of_two_decimal(k);
    EXPECT_EQ(integer_bit_length(power), static_cast<std::size_t>(k + 1)) << k;
    EXPECT_EQ(integer_bit_length(minus_one(power)), static_cast<std::size_t>(k)) << k;
    EXPECT_EQ(integer_bit_length("-" + power), static_cast<std::size_t>(k + 1)) << k;
  }
}

TEST(JsonUtilities, Utf8RoundTrip) {
  std::u32string text = {U'a', U'\u00e9', U'\u20ac', U'\U0001F600'};
  EXPECT_EQ(samebits::json::to_utf8(text), "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(parse("\"" + samebits::json::to_utf8(text) + "\"").as_string(), text);
  EXPECT_EQ(from_ascii("abc"), U"abc");
}

namespace samebits {
namespace {

// The Python dialect (files written by other tools): NaN / Infinity / -Infinity literals, and a repeated key
// keeps its first position with its last value, as json.loads builds a dict. Strict refuses both.
TEST(JsonPythonDialect, NonFiniteLiteralsAndRepeatedKeys) {
  const json::Value v =
      json::parse(R"({"a":NaN,"b":[Infinity,-Infinity],"a":1,"c":{"x":1,"x":2}})", json::Dialect::Python);
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.as_object().size(), 3u);
  EXPECT_EQ(json::to_utf8(v.as_object()[0].first), "a");
  EXPECT_EQ(v.find("a")->integer_decimal(), "1");
  EXPECT_TRUE(std::isinf(v.find("b")->as_array()[0].as_float()));
  EXPECT_LT(v.find("b")->as_array()[1].as_float(), 0.0);
  EXPECT_EQ(v.find("c")->find("x")->integer_decimal(), "2");
  EXPECT_TRUE(std::isnan(json::parse("NaN", json::Dialect::Python).as_float()));
  EXPECT_THROW(json::parse("NaN"), json::ParseError);
  EXPECT_THROW(json::parse(R"({"x":1,"x":2})"), json::ParseError);
  EXPECT_THROW(json::parse("-Inf", json::Dialect::Python), json::ParseError);
  EXPECT_THROW(json::parse("Infinityx", json::Dialect::Python), json::ParseError);
}

}  // namespace
}  // namespace samebits
