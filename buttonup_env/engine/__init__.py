"""The batched engine: thousands of games played at once as arrays over tables of every board,
by a readable numpy backend or a compiled numba one."""
