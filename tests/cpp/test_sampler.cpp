// The shared sampler (docs/api.md §16): greedy equals argmax, a seed reproduces its tokens, every option
// moves the distribution as documented (frequencies of many draws on fixed logits), and with the
// penalties off it chooses exactly what the CLI's earlier sampler chose for the same seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <samebits/sampler.hpp>
#include <stdexcept>
#include <vector>

#include "numerics/primitives.hpp"

namespace samebits {
namespace {

std::vector<float> log_probs(const std::vector<double>& p) {
  std::vector<float> out;
  for (double v : p) out.push_back(static_cast<float>(std::log(v)));
  return out;
}

// Frequencies of `draws` samples.
std::vector<double> frequencies(const std::vector<float>& logits, SamplerOptions options, int draws = 40000) {
  Sampler sampler(options);
  std::vector<double> count(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i)
    count[static_cast<std::size_t>(
        sampler.sample(logits.data(), static_cast<std::int64_t>(logits.size())))] += 1.0;
  for (double& c : count) c /= draws;
  return count;
}

void expect_distribution(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.01) << "token " << i;
}

const std::vector<double> kP = {0.1, 0.2, 0.3, 0.4};

TEST(Sampler, PlainSamplingFollowsTheSoftmax) { expect_distribution(frequencies(log_probs(kP), {}), kP); }

TEST(Sampler, TemperatureSharpensAndFlattens) {
  SamplerOptions o;
  o.temperature = 0.5;  // p^2, renormalized
  expect_distribution(frequencies(log_probs(kP), o), {0.01 / 0.3, 0.04 / 0.3, 0.09 / 0.3, 0.16 / 0.3});
  o.temperature = 100.0;  // nearly uniform
  const auto flat = frequencies(log_probs(kP), o);
  for (double f : flat) EXPECT_NEAR(f, 0.25, 0.012);
}

TEST(Sampler, GreedyIsArgmaxWithTheLowestIdOnTies) {
  SplitMix64 random(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(300);
    for (float& l : logits) l = static_cast<float>(static_cast<int>(random.next() % 64)) * 0.25f - 8.0f;
    SamplerOptions o;
    o.temperature = 0.0;
    o.top_k = 5;  // greedy ignores the truncations
    o.top_p = 0.3;
    Sampler sampler(o);
    const auto argmax = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(sampler.sample(logits.data(), 300), argmax);
  }
  const std::vector<float> tie = {1.0f, 3.0f, 3.0f, 2.0f};
  SamplerOptions o;
  o.temperature = 0.0;
  EXPECT_EQ(Sampler(o).sample(tie.data(), 4), 1);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  SamplerOptions o;
  o.top_k = 2;
  expect_distribution(frequencies(log_probs(kP), o), {0.0, 0.0, 3.0 / 7.0, 4.0 / 7.0});
  o.top_k = 1;
  expect_distribution(frequencies(log_probs(kP), o), {0.0, 0.0, 0.0, 1.0});
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingTheMass) {
  SamplerOptions o;
  o.top_p = 0.65;  // 0.4 + 0.3 = 0.7 is the first prefix reaching 0.65
  expect_distribution(frequencies(log_probs(kP), o), {0.0, 0.0, 3.0 / 7.0, 4.0 / 7.0});
  o.top_p = 0.75;  // needs 0.2 as well
  expect_distribution(frequencies(log_probs(kP), o), {0.0, 2.0 / 9.0, 3.0 / 9.0, 4.0 / 9.0});
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  SamplerOptions o;
  o.min_p = 0.6;  // 0.6 * 0.4 = 0.24: keeps 0.4 and 0.3
  expect_distribution(frequencies(log_probs(kP), o), {0.0, 0.0, 3.0 / 7.0, 4.0 / 7.0});
  o.min_p = 0.45;  // 0.18: keeps 0.2 too
  expect_distribution(frequencies(log_probs(kP), o), {0.0, 2.0 / 9.0, 3.0 / 9.0, 4.0 / 9.0});
  o.min_p = 1.0;  // only the best
  expect_distribution(frequencies(log_probs(kP), o), {0.0, 0.0, 0.0, 1.0});
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplerOptions o;
  o.temperature = 0.0;
  o.repetition_penalty = 2.0;
  const std::vector<float> positive = {2.0f, 1.5f};
  Sampler a(o);
  EXPECT_EQ(a.sample(positive.data(), 2), 0);
  a.accept(0);  // 2.0 / 2 = 1.0 < 1.5
  EXPECT_EQ(a.sample(positive.data(), 2), 1);
  const std::vector<float> negative = {-1.0f, -1.5f};
  Sampler b(o);
  b.accept(0);  // -1.0 * 2 = -2.0 < -1.5
  EXPECT_EQ(b.sample(negative.data(), 2), 1);
  // The distribution: token 3's logit log(0.4) < 0 becomes 2 log(0.4), i.e. p 0.16 before renormalizing.
  SamplerOptions d;
  d.repetition_penalty = 2.0;
  Sampler c(d);
  c.accept(3);
  const auto logits = log_probs(kP);
  std::vector<double> count(4, 0.0);
  for (int i = 0; i < 40000; ++i) count[static_cast<std::size_t>(c.sample(logits.data(), 4))] += 1.0 / 40000;
  const double z = 0.1 + 0.2 + 0.3 + 0.16;
  expect_distribution(count, {0.1 / z, 0.2 / z, 0.3 / z, 0.16 / z});
}

TEST(Sampler, PenaltiesLookOnlyAtTheLastNTokens) {
  SamplerOptions o;
  o.temperature = 0.0;
  o.repetition_penalty = 2.0;
  o.penalty_last_n = 1;
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  Sampler s(o);
  s.accept(0);
  s.accept(2);  // pushes 0 out of the window
  EXPECT_EQ(s.window(), std::vector<std::int32_t>{2});
  EXPECT_EQ(s.sample(logits.data(), 3), 0);
  o.penalty_last_n = 0;  // no window at all
  Sampler none(o);
  none.accept(0);
  EXPECT_TRUE(none.window().empty());
  EXPECT_EQ(none.sample(logits.data(), 3), 0);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesSubtract) {
  const std::vector<float> logits = {1.0f, 0.5f};
  SamplerOptions o;
  o.temperature = 0.0;
  o.presence_penalty = 0.6;  // once: 0.4 < 0.5
  Sampler p(o);
  p.accept(0);
  p.accept(0);
  EXPECT_EQ(p.sample(logits.data(), 2), 1);
  o.presence_penalty = 0.4;  // 0.6 > 0.5, however often it occurred
  Sampler q(o);
  for (int i = 0; i < 5; ++i) q.accept(0);
  EXPECT_EQ(q.sample(logits.data(), 2), 0);
  SamplerOptions f;
  f.temperature = 0.0;
  f.frequency_penalty = 0.3;
  Sampler once(f);
  once.accept(0);  // 0.7 > 0.5
  EXPECT_EQ(once.sample(logits.data(), 2), 0);
  once.accept(0);  // 0.4 < 0.5
  EXPECT_EQ(once.sample(logits.data(), 2), 1);
}

TEST(Sampler, ASeedReproducesAndACopyContinuesIdentically) {
  std::vector<float> logits(256);
  SplitMix64 random(5);
  for (float& l : logits) l = static_cast<float>(random.uniform() * 6.0);
  SamplerOptions o;
  o.seed = 42;
  o.top_k = 40;
  o.repetition_penalty = 1.3;
  Sampler a(o), b(o);
  std::vector<std::int32_t> first, second;
  for (int i = 0; i < 100; ++i) {
    first.push_back(a.sample_and_accept(logits.data(), 256));
    second.push_back(b.sample_and_accept(logits.data(), 256));
  }
  EXPECT_EQ(first, second);
  Sampler c = a;
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(a.sample_and_accept(logits.data(), 256), c.sample_and_accept(logits.data(), 256));
  o.seed = 43;
  Sampler other(o);
  std::vector<std::int32_t> third;
  for (int i = 0; i < 100; ++i) third.push_back(other.sample_and_accept(logits.data(), 256));
  EXPECT_NE(first, third);
}

// The CLI's sampler before it moved here (temperature, top-k, top-p; stable sort by logit; weights with
// the engine's expf): with the new options at their defaults the shared sampler makes the same choices.
std::int32_t earlier_choice(const float* logits, std::int64_t vocab, double temperature, std::int64_t top_k,
                            double top_p, SplitMix64& random) {
  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
  if (temperature <= 0.0) return order[0];
  std::size_t keep = order.size();
  if (top_k > 0) keep = std::min<std::size_t>(keep, static_cast<std::size_t>(top_k));
  const float inverse = static_cast<float>(1.0 / temperature);
  const float top = logits[order[0]];
  std::vector<double> weight(keep);
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    weight[i] = primitives::expf((logits[order[i]] - top) * inverse);
    total += weight[i];
  }
  if (top_p < 1.0) {
    double mass = 0.0;
    std::size_t cut = 0;
    while (cut < keep && mass < top_p * total) mass += weight[cut++];
    keep = std::max<std::size_t>(cut, 1);
    total = mass;
  }
  double u = random.uniform() * total;
  for (std::size_t i = 0; i < keep; ++i) {
    if (u < weight[i]) return order[i];
    u -= weight[i];
  }
  return order[keep - 1];
}

TEST(Sampler, DefaultsChooseWhatTheEarlierCliSamplerChose) {
  SplitMix64 data(99);
  const std::array<double, 4> temperatures = {0.0, 0.8, 1.0, 1.7};
  const std::array<std::int64_t, 3> top_ks = {0, 1, 40};
  const std::array<double, 3> top_ps = {1.0, 0.9, 0.3};
  for (double t : temperatures)
    for (std::int64_t k : top_ks)
      for (double p : top_ps) {
        SamplerOptions o;
        o.temperature = t;
        o.top_k = k;
        o.top_p = p;
        o.seed = 7;
        Sampler sampler(o);
        SplitMix64 earlier(7);
        for (int step = 0; step < 60; ++step) {
          std::vector<float> logits(256);
          // Coarse values, so ties are common and the tie order is exercised.
          for (float& l : logits) l = static_cast<float>(static_cast<int>(data.next() % 40)) * 0.2f;
          const std::int32_t want = earlier_choice(logits.data(), 256, t, k, p, earlier);
          ASSERT_EQ(sampler.sample_and_accept(logits.data(), 256), want) << t << " " << k << " " << p;
        }
      }
}

TEST(Sampler, RefusesOptionsOutOfRange) {
  const auto refused = [](auto edit) {
    SamplerOptions o;
    edit(o);
    EXPECT_THROW(Sampler{o}, std::runtime_error);
  };
  refused([](SamplerOptions& o) { o.temperature = -1.0; });
  refused([](SamplerOptions& o) { o.temperature = std::nan(""); });
  refused([](SamplerOptions& o) { o.top_k = -1; });
  refused([](SamplerOptions& o) { o.top_p = 0.0; });
  refused([](SamplerOptions& o) { o.top_p = 1.5; });
  refused([](SamplerOptions& o) { o.min_p = -0.1; });
  refused([](SamplerOptions& o) { o.repetition_penalty = 0.0; });
  refused([](SamplerOptions& o) { o.penalty_last_n = -2; });
  refused([](SamplerOptions& o) { o.presence_penalty = INFINITY; });
  refused([](SamplerOptions& o) { o.frequency_penalty = -INFINITY; });
}

std::string feed(StopStrings& stops, const std::string& text) {
  std::string out;
  for (char c : text) out += stops.push(c);
  return out;
}

TEST(StopStrings, HoldsBackPossibleStartsAndStopsBeforeTheStopString) {
  StopStrings stops({"\n\n", "END"});
  EXPECT_EQ(feed(stops, "abc E"), "abc ");  // "E" may begin "END"
  EXPECT_EQ(feed(stops, "Nx"), "ENx");      // it did not
  EXPECT_FALSE(stops.stopped());
  EXPECT_EQ(feed(stops, "yEN"), "y");
  EXPECT_EQ(feed(stops, "D"), "");
  EXPECT_TRUE(stops.stopped());
  EXPECT_EQ(feed(stops, "more"), "");
  StopStrings none;
  EXPECT_EQ(feed(none, "all\n\nof it"), "all\n\nof it");
  StopStrings tail({"xyz"});
  EXPECT_EQ(feed(tail, "abxy"), "ab");
  EXPECT_EQ(tail.flush(), "xy");
  StopStrings overlap({"aab"});
  EXPECT_EQ(feed(overlap, "aaab"), "a");
  EXPECT_TRUE(overlap.stopped());
}

}  // namespace
}  // namespace samebits
