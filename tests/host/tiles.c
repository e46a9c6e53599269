/* tests/host/tiles.c: the tile views of iris.h. */
#include "harness.h"

/* ---------------------------------------------------------------- tile views -- */
/* Checks a view against tile arithmetic computed here; returns 0 or writes why. */
static int check_tiles(long long rows, long long cols, long long stride, int elem, int bm, int bn, char *why, size_t cap) {
  static unsigned char mark[256 * 256];
  static char buf[256 * 256 * 8];
  iris_view2d_t v = iris_view2d(buf, rows, cols, stride, elem);
  long long tm_count = 0, tn_count = 0, r0, c0, id, r, c;
  long long last_rows, last_cols;
  if (rows * stride * elem > (long long)sizeof buf || rows * cols > (long long)sizeof mark) return snprintf(why, cap, "test buffer too small"), 1;
  for (r0 = 0; r0 < rows; r0 += bm) tm_count++;
  for (c0 = 0; c0 < cols; c0 += bn) tn_count++;
  last_rows = rows - (tm_count - 1) * bm;
  last_cols = cols - (tn_count - 1) * bn;
  if (iris_view_tiles_m(v, bm) != tm_count || iris_view_tiles_n(v, bn) != tn_count || iris_view_num_tiles(v, bm, bn) != tm_count * tn_count)
    return snprintf(why, cap, "tiles_m %lld tiles_n %lld num %lld, counted %lld x %lld", iris_view_tiles_m(v, bm), iris_view_tiles_n(v, bn),
                    iris_view_num_tiles(v, bm, bn), tm_count, tn_count),
           1;
  for (r = 0; r < tm_count; r++)
    if (iris_view_tile_rows(v, bm, r) != (r == tm_count - 1 ? last_rows : bm))
      return snprintf(why, cap, "tile row %lld has %d rows, want %lld", r, iris_view_tile_rows(v, bm, r), r == tm_count - 1 ? last_rows : (long long)bm), 1;
  for (c = 0; c < tn_count; c++)
    if (iris_view_tile_cols(v, bn, c) != (c == tn_count - 1 ? last_cols : bn))
      return snprintf(why, cap, "tile col %lld has %d cols, want %lld", c, iris_view_tile_cols(v, bn, c), c == tn_count - 1 ? last_cols : (long long)bn), 1;
  if (iris_view_tile_rows(v, bm, tm_count) != 0 || iris_view_tile_cols(v, bn, tn_count) != 0)
    return snprintf(why, cap, "a tile past the edge is not empty (%d rows, %d cols)", iris_view_tile_rows(v, bm, tm_count), iris_view_tile_cols(v, bn, tn_count)), 1;
  for (r = 0; r < rows; r++)
    for (c = 0; c < cols; c++)
      if ((char *)iris_view_elem(v, r, c) != buf + (r * stride + c) * elem)
        return snprintf(why, cap, "iris_view_elem(%lld, %lld) is at byte %ld, want %lld", r, c, (long)((char *)iris_view_elem(v, r, c) - buf),
                        (r * stride + c) * elem),
               1;
  memset(mark, 0, sizeof mark);
  id = 0;
  for (r0 = 0; r0 < tm_count; r0++)
    for (c0 = 0; c0 < tn_count; c0++, id++) {
      long long tm = -1, tn = -1, i, j;
      iris_view2d_t t;
      iris_view_tile_coords(v, bn, id, &tm, &tn);
      if (tm != r0 || tn != c0) return snprintf(why, cap, "tile %lld -> (%lld, %lld), want (%lld, %lld)", id, tm, tn, r0, c0), 1;
      t = iris_view_tile(v, bm, bn, tm, tn);
      if (t.stride != stride || t.elem_size != elem || t.rows != iris_view_tile_rows(v, bm, tm) || t.cols != iris_view_tile_cols(v, bn, tn))
        return snprintf(why, cap, "tile %lld: sub-view %lld x %lld stride %lld elem %d", id, t.rows, t.cols, t.stride, t.elem_size), 1;
      for (i = 0; i < t.rows; i++)
        for (j = 0; j < t.cols; j++) {
          long long at = (long long)((char *)iris_view_elem(t, i, j) - buf), e, er, ec;
          if (at < 0 || at % elem) return snprintf(why, cap, "tile %lld elem (%lld, %lld) at byte %lld", id, i, j, at), 1;
          e = at / elem;
          er = e / stride;
          ec = e % stride;
          if (er >= rows || ec >= cols) return snprintf(why, cap, "tile %lld elem (%lld, %lld) maps outside the view to (%lld, %lld)", id, i, j, er, ec), 1;
          mark[er * cols + ec]++;
        }
    }
  for (r = 0; r < rows; r++)
    for (c = 0; c < cols; c++)
      if (mark[r * cols + c] != 1) return snprintf(why, cap, "element (%lld, %lld) covered %d times", r, c, mark[r * cols + c]), 1;
  return 0;
}

static void test_tiles(void) {
  char why[300] = "";
  iris_view2d_t v = iris_view2d((void *)0, 100, 60, 64, 4);
  long long tm = -1, tn = -1, n = 0, r0;
  int ok;
  /* the 100x60 case: the brief's numbers, counted here */
  for (r0 = 0; r0 < 100; r0 += 32) n++;
  check(iris_view_tiles_m(v, 32) == n, "tiles 100x60 tiles_m", "tiles_m %lld, counted %lld", iris_view_tiles_m(v, 32), n);
  for (n = 0, r0 = 0; r0 < 60; r0 += 16) n++;
  check(iris_view_tiles_n(v, 16) == n, "tiles 100x60 tiles_n", "tiles_n %lld, counted %lld", iris_view_tiles_n(v, 16), n);
  check(iris_view_num_tiles(v, 32, 16) == iris_view_tiles_m(v, 32) * iris_view_tiles_n(v, 16) && iris_view_num_tiles(v, 32, 16) == 16, "tiles 100x60 num_tiles",
        "num_tiles %lld", iris_view_num_tiles(v, 32, 16));
  check(iris_view_tile_rows(v, 32, 3) == 100 - 3 * 32 && iris_view_tile_cols(v, 16, 3) == 60 - 3 * 16 && iris_view_tile_rows(v, 32, 0) == 32 &&
            iris_view_tile_cols(v, 16, 2) == 16,
        "tiles 100x60 edge extents", "last tile row %d rows, last tile col %d cols", iris_view_tile_rows(v, 32, 3), iris_view_tile_cols(v, 16, 3));
  iris_view_tile_coords(v, 16, 13, &tm, &tn);
  check(tm == 3 && tn == 1, "tiles 100x60 tile coords", "tile 13 -> (%lld, %lld)", tm, tn);
  ok = !check_tiles(100, 60, 64, 4, 32, 16, why, sizeof why);
  check(ok, "tiles 100x60 cover every element once", "%s", why);
  ok = !check_tiles(64, 64, 64, 8, 32, 16, why, sizeof why);
  check(ok, "tiles exact fit", "%s", why);
  ok = !check_tiles(5, 3, 7, 2, 32, 16, why, sizeof why);
  check(ok, "tiles view smaller than a tile", "%s", why);
  ok = !check_tiles(97, 131, 140, 1, 8, 24, why, sizeof why);
  check(ok, "tiles odd sizes", "%s", why);
  { /* a tile size of 0 or below, or a view without columns: no tiles, every tile empty (it divided by 0: SIGFPE; a negative size was a tile's extent) */
    iris_view2d_t e = iris_view2d((void *)0, 100, 0, 64, 4);
    long long etm = -1, etn = -1, ftm = -1, ftn = -1;
    iris_view_tile_coords(e, 16, 5, &etm, &etn);
    iris_view_tile_coords(v, 0, 5, &ftm, &ftn);
    check(iris_cdiv(7, 0) == 0 && iris_cdiv(7, -2) == 0 && iris_view_tiles_m(v, 0) == 0 && iris_view_tiles_n(v, -16) == 0 && iris_view_num_tiles(v, 0, 0) == 0 &&
              iris_view_num_tiles(e, 32, 16) == 0 && iris_view_tile_rows(v, 0, 0) == 0 && iris_view_tile_cols(v, 0, 0) == 0 &&
              iris_view_tile_rows(v, -16, 0) == 0 && iris_view_tile_cols(v, -16, 0) == 0 &&
              iris_view_tile_rows(e, 32, etm) * iris_view_tile_cols(e, 16, etn) == 0 && iris_view_tile_rows(v, 32, ftm) * iris_view_tile_cols(v, 0, ftn) == 0,
          "tiles of size 0 or below, or a view of 0 columns: no tiles, empty ones, no division by 0", "coords (%lld, %lld) and (%lld, %lld)", etm, etn, ftm, ftn);
  }
}
