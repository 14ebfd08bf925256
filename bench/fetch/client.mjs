// bench/fetch.sh's Node client: sequential keep-alive GETs with Node's fetch
// (undici) for SECONDS; prints "requests seconds".
//   node bench/fetch/client.mjs URL SECONDS
const [url, seconds] = [process.argv[2], Number(process.argv[3])];
let n = 0;
const t0 = performance.now();
do {
  for (let i = 0; i < 100; i++) {
    const res = await fetch(url);
    await res.text();
    if (res.status !== 200) throw new Error(`status ${res.status}`);
    n++;
  }
} while (performance.now() - t0 < seconds * 1000);
console.log(n, (performance.now() - t0) / 1000);
