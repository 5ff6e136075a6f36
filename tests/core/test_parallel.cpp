// parallel_for and its thread pool (lib/include/favor/core/parallel.hpp).
#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "favor/core/parallel.hpp"

TEST_CASE("parallel_for: every index once, the first error rethrown", "[parallel]") {
    std::vector<std::atomic<int>> calls(1000);
    favor::parallel_for(calls.size(), 2, [&](std::size_t i) { calls[i].fetch_add(1); });
    for (const auto& c : calls) REQUIRE(c.load() == 1);
    REQUIRE_THROWS_AS(favor::parallel_for(100, 2, [](std::size_t i) {
                          if (i == 17) throw std::runtime_error("index 17");
                      }),
                      std::runtime_error);
}

TEST_CASE("parallel_for: calls one after another never need a second pool thread", "[parallel]") {
    // Work so small that the caller claims every index before its helper wakes: the helper's
    // place must be withdrawn and the helper counted idle again before the call returns, or the
    // next call finds no idle thread and starts another (the pool then grew to 4 threads on a
    // 2-core machine, and favor.torch's steps ran 30% slower, once torch had run beside it).
    auto& pool = favor::detail::ThreadPool::get();
    favor::parallel_for(2, 2, [](std::size_t) {});
    const std::size_t before = pool.threads();
    std::atomic<std::size_t> sum{0};
    for (int call = 0; call < 20000; ++call)
        favor::parallel_for(2, 2, [&](std::size_t i) { sum.fetch_add(i + 1, std::memory_order_relaxed); });
    REQUIRE(sum.load() == 3u * 20000u);
    REQUIRE(pool.threads() == before);
}
