"""Tiny inline trace files in each supported format (imported by the traces tests)."""

# Azure 2023 layout: 7 fractional digits, CRLF line endings, no trailing newline.
AZURE_CSV = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
    "2023-11-16 18:15:46.6805900,374,44\r\n"
    "2023-11-16 18:15:50.9951690,396,109\r\n"
    "2023-11-16 18:15:51.2224670,879,55"
)

MOONCAKE_JSONL = (
    '{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [0, 1]}\n'
    '{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [0, 2]}\n'
    '{"timestamp": 3000, "input_length": 1024, "output_length": 7, "hash_ids": [0, 1]}\n'
    '{"timestamp": 5999, "input_length": 10, "output_length": 2, "hash_ids": [3]}\n'
)

LENGTHS_CSV = (
    "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n"
    "74,918,992,0.0806100217864923\n"
    "290,905,1195,0.3204419889502762\n"
    "10,5,15,2.0\n"
)

NATIVE_CSV = (
    "# hash_block_size=4\n"
    "request_id,arrival_s,prompt_tokens,output_tokens,lane,priority,tenant,prefix_hashes\n"
    "a,0.0,5,3,interactive,0,acme,0 1\n"
    "b,0.25,4,1,,,,\n"
    "c,1.5,8,2,batch,2,,0 7\n"
)

# Vidur's replay format (microsoft/vidur data/processed_traces/splitwise_conv.csv layout):
# arrived_at in seconds from the first request, plus the length columns; extra columns ignored.
VIDUR_CSV = (
    "arrived_at,num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n"
    "0.0,374,44,418,8.5\n"
    "4.314579,396,109,505,3.63302752293578\n"
    "4.541877,879,55,934,15.981818181818182\n"
    "7.25,12,1,13,12.0\n"
)
