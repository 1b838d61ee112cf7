// Paged KV caches (Problem::page_size) through the reference: the shape text and its errors, the
// page table (a shuffled pool, every key row of every sequence on a page of its own sequence,
// the last page partial), and FLOPs and bytes with the page table counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "reference/flops.h"
#include "reference/problem.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

std::string parse_error(const std::string& text) {
  Problem problem;
  const Status status = parse_shape(text, problem);
  EXPECT_FALSE(status.ok) << text << " parsed";
  return status.message;
}

TEST(PagedCache, ShapeTextAndErrors) {
  const Problem dense = parsed_shape("b=2,hq=8,hkv=2,sq=1,sk=1000,d=64,dtype=bf16,page=16");
  EXPECT_EQ(dense.page_size, 16);
  EXPECT_EQ(shape_string(dense), "b=2,hq=8,hkv=2,sq=1,sk=1000,d=64,dtype=bf16,page=16");
  const Problem ragged = parsed_shape("hq=4,d=64,varlen=list(1:1000,4:17),page=256");
  EXPECT_EQ(shape_string(ragged),
            "b=2,hq=4,hkv=4,sq=4,sk=1000,d=64,dtype=fp32,varlen=list(1:1000,4:17),page=256");
  EXPECT_NE(parse_error("s=64,page=16,layout=bhsd").find("accepted layouts bshd, thd"),
            std::string::npos);
  EXPECT_NE(parse_error("s=64,page=16,pass=bwd").find("accepted pass fwd"), std::string::npos);
  EXPECT_NE(parse_error("s=64,page=-1").find("accepted 0 (K and V contiguous) or 1 .. "),
            std::string::npos);
}

// Every key row of every sequence on a page of its own, each (page, row) used once, pages in a
// shuffled order, and the last page of a sequence whose keys do not fill it partial.
void expect_paged(const Problem& p) {
  SCOPED_TRACE(shape_string(p));
  const ProblemLayout layout = describe_layout(p);
  const TensorPlacement& k = layout.k;
  ASSERT_EQ(k.page_size, p.page_size);
  int64_t pages = 0;
  for (int64_t b = 0; b < p.batch; ++b) pages += p.pages_of(b);
  EXPECT_EQ(layout.cache_pages, pages);
  EXPECT_EQ(layout.k_buffer_elements, pages * p.page_size * p.heads_kv * p.head_dim_qk);
  EXPECT_EQ(layout.v.page_table, k.page_table);

  std::vector<int64_t> used_pages;
  std::set<int64_t> rows;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t slot = 0; slot < k.pages_per_sequence; ++slot) {
      const int64_t page = k.page_table[static_cast<size_t>(b * k.pages_per_sequence + slot)];
      EXPECT_EQ(page >= 0, slot < p.pages_of(b)) << "b " << b << " slot " << slot;
      if (page >= 0) used_pages.push_back(page);
    }
    for (int64_t s = 0; s < p.key_rows(b); ++s) {
      const int64_t start = k.row_start(b, s, 0);
      EXPECT_EQ(start % (p.heads_kv * p.head_dim_qk), 0);
      EXPECT_TRUE(rows.insert(start).second) << "key row placed twice";
      EXPECT_LT(start, layout.k_buffer_elements);
    }
  }
  std::vector<int64_t> sorted = used_pages;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < pages; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  if (pages > 4) {
    EXPECT_NE(used_pages, sorted) << "pages should be shuffled";
  }
}

TEST(PagedCache, PageTableHoldsEveryKeyRowOnceInAShuffledPool) {
  for (const char* shape : {"b=3,hq=4,hkv=2,sq=1,sk=1000,d=8,page=16", "b=2,s=64,d=8,page=64",
                            "hq=2,d=8,varlen=list(1:1000,4:17,2:0,1:256),page=16",
                            "b=5,s=70,d=8,varlen=uniform,page=7", "b=2,sq=3,sk=5,d=8,page=1000"}) {
    expect_paged(parsed_shape(shape));
  }
  // The last page is partial where the keys do not fill it: 1000 = 62 pages of 16 and 8 rows.
  const Problem p = parsed_shape("b=1,sq=1,sk=1000,d=8,page=16");
  EXPECT_EQ(p.pages_of(0), 63);
}

TEST(PagedCache, BytesCountThePageTableAndTheKeysHeldNotWholePages) {
  const Problem contiguous = parsed_shape("hq=4,hkv=1,d=16,dtype=bf16,varlen=list(1:1000,4:200)");
  Problem paged = contiguous;
  paged.page_size = 16;
  // 63 + 13 pages of int32 on top of the same q, k, v and out traffic; FLOPs unchanged.
  EXPECT_EQ(attention_bytes(paged) - attention_bytes(contiguous), 4.0 * (63 + 13));
  EXPECT_EQ(attention_flops(paged), attention_flops(contiguous));
}

}  // namespace
}  // namespace attnbench
